//! File-system detection: which file system (if any) starts at an offset.
//!
//! FAT, exFAT, NTFS, ext2/3/4 and APFS are parsed by this crate
//! ([`FsKind::is_parsed`]); the others are recognised and reported so the
//! engine can still run stages that need no file system (carving, keyword
//! search over raw bytes) over the partition. An APFS container is found
//! by its superblock's `NXSB` magic at byte 32, bare or at the start of a
//! GPT partition (of type `7C3457EF-0000-11AA-AA11-00306543ECAC` or any
//! other: detection reads the bytes, not the partition type).

use crate::bytes::{u16_at, u32_at};
pub use crate::kind::FsKind;

use crate::error::FsError;
use crate::fat::boot::BootSector;
use crate::read::{ReadAt, read_full};

fn read_block<R: ReadAt + ?Sized>(
    src: &R,
    start: u64,
    limit: u64,
    rel: u64,
    len: usize,
) -> Result<Vec<u8>, FsError> {
    if rel >= limit {
        return Ok(Vec::new());
    }
    let len = len.min(usize::try_from(limit - rel).unwrap_or(usize::MAX));
    let mut buf = vec![0u8; len];
    let Some(pos) = start.checked_add(rel) else {
        return Ok(Vec::new());
    };
    let n = read_full(src, &mut buf, pos).map_err(|e| FsError::io(pos, len, e))?;
    buf.truncate(n);
    Ok(buf)
}

/// Detects the file system starting at byte `start` of `src` in a volume of
/// `len` bytes. Reads at most a few KiB. Only I/O errors are errors; bytes
/// that match nothing give [`FsKind::Unknown`].
pub fn detect_filesystem<R: ReadAt + ?Sized>(
    src: &R,
    start: u64,
    len: u64,
) -> Result<FsKind, FsError> {
    let head = read_block(src, start, len, 0, 4096)?;
    if head.len() >= 512 {
        let oem = &head[3..11];
        let sig_ok = head[510] == 0x55 && head[511] == 0xAA;
        if oem == b"NTFS    " && sig_ok {
            return Ok(FsKind::Ntfs);
        }
        if oem == b"EXFAT   " {
            return Ok(FsKind::ExFat);
        }
        if oem == b"-FVE-FS-" {
            return Ok(FsKind::BitLocker);
        }
        if oem == b"ReFS\0\0\0\0" {
            return Ok(FsKind::ReFs);
        }
        if head.starts_with(b"LUKS\xba\xbe") {
            return Ok(FsKind::Luks);
        }
        if head.starts_with(b"XFSB") {
            return Ok(FsKind::Xfs);
        }
        if head.get(32..36) == Some(b"NXSB") {
            return Ok(FsKind::Apfs);
        }
        let mut sector = [0u8; 512];
        sector.copy_from_slice(&head[..512]);
        if let Ok(bs) = BootSector::parse(&sector) {
            return Ok(bs.kind);
        }
    }
    if head.len() >= 2048 {
        let sb = &head[1024..2048];
        if u16_at(sb, 56) == Some(0xEF53) {
            let compat = u32_at(sb, 0x5C).unwrap_or(0);
            let incompat = u32_at(sb, 0x60).unwrap_or(0);
            let ro_compat = u32_at(sb, 0x64).unwrap_or(0);
            // Features only ext4 sets: extents, 64bit, flex_bg, huge_file,
            // gdt_csum, dir_nlink, extra_isize, metadata_csum.
            let ext4 = incompat & (0x40 | 0x80 | 0x200) != 0
                || ro_compat & (0x8 | 0x10 | 0x20 | 0x40 | 0x400) != 0;
            return Ok(if ext4 {
                FsKind::Ext4
            } else if compat & 0x4 != 0 {
                FsKind::Ext3
            } else {
                FsKind::Ext2
            });
        }
        if matches!(&sb[..2], b"H+" | b"HX") {
            return Ok(FsKind::HfsPlus);
        }
    }
    let iso = read_block(src, start, len, 32769, 5)?;
    if iso == b"CD001" {
        return Ok(FsKind::Iso9660);
    }
    let btrfs = read_block(src, start, len, 0x10040, 8)?;
    if btrfs == b"_BHRfS_M" {
        return Ok(FsKind::Btrfs);
    }
    Ok(FsKind::Unknown)
}
