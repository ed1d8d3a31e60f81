//! On-disk inodes: the fields a record needs, the in-inode extended
//! attributes (for inline data), and the `metadata_csum` check.

use crate::bytes::{u16_at, u32_at};
use crate::record::Timestamp;

use super::crc32c;

/// `i_mode` type bits.
pub const S_IFMT: u16 = 0xF000;
/// FIFO.
pub const S_IFIFO: u16 = 0x1000;
/// Character device.
pub const S_IFCHR: u16 = 0x2000;
/// Directory.
pub const S_IFDIR: u16 = 0x4000;
/// Block device.
pub const S_IFBLK: u16 = 0x6000;
/// Regular file.
pub const S_IFREG: u16 = 0x8000;
/// Symbolic link.
pub const S_IFLNK: u16 = 0xA000;
/// Socket.
pub const S_IFSOCK: u16 = 0xC000;

/// `i_flags`: directory indexed by a hashed tree.
pub const FL_INDEX: u32 = 0x1000;
/// `i_flags`: `i_blocks` counts file-system blocks (huge_file).
pub const FL_HUGE_FILE: u32 = 0x4_0000;
/// `i_flags`: mapped by an extent tree.
pub const FL_EXTENTS: u32 = 0x8_0000;
/// `i_flags`: content stored in the inode (and `system.data`).
pub const FL_INLINE_DATA: u32 = 0x1000_0000;

/// Bytes of `i_block`.
pub const I_BLOCK_LEN: usize = 60;
/// Bytes of the original (revision 0) inode.
pub const GOOD_OLD_INODE_SIZE: usize = 128;

/// The fields of an inode the reader uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inode {
    /// Type and permission bits.
    pub mode: u16,
    /// Owner (low and high halves joined).
    pub uid: u32,
    /// Group (low and high halves joined).
    pub gid: u32,
    /// `i_size_lo`.
    pub size_lo: u32,
    /// `i_size_high`.
    pub size_high: u32,
    /// Raw `i_atime`, `i_ctime`, `i_mtime`, `i_dtime`, `i_crtime`.
    pub atime: u32,
    /// Raw change time; TSK counts an inode "used" when it is not 0.
    pub ctime: u32,
    /// Raw modification time.
    pub mtime: u32,
    /// Raw deletion time.
    pub dtime: u32,
    /// Raw creation time (0 without room for it).
    pub crtime: u32,
    /// `*_extra` words: (atime, ctime, mtime, crtime); 0 where absent.
    pub extra: [u32; 4],
    /// Hard links.
    pub links: u16,
    /// `i_flags`.
    pub flags: u32,
    /// `i_block`: block map, extent tree root, inline data or a fast
    /// symlink's target.
    pub block: [u8; I_BLOCK_LEN],
    /// `i_generation`.
    pub generation: u32,
    /// `i_blocks` (512-byte units, or blocks with `huge_file`), both halves.
    pub blocks: u64,
    /// Bytes after the first 128 the inode says it uses.
    pub extra_isize: u16,
}

impl Inode {
    /// Parses the first bytes of an on-disk inode (at least 128).
    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < GOOD_OLD_INODE_SIZE {
            return None;
        }
        let u32f = |o| u32_at(b, o).unwrap_or(0);
        let u16f = |o| u16_at(b, o).unwrap_or(0);
        let extra_isize = if b.len() > GOOD_OLD_INODE_SIZE {
            u16f(0x80)
        } else {
            0
        };
        // Fields past 128 bytes count only inside the extra size.
        let end = GOOD_OLD_INODE_SIZE + usize::from(extra_isize);
        let ext = |o: usize| {
            if o + 4 <= end.min(b.len()) {
                u32f(o)
            } else {
                0
            }
        };
        let mut block = [0u8; I_BLOCK_LEN];
        block.copy_from_slice(&b[0x28..0x28 + I_BLOCK_LEN]);
        Some(Inode {
            mode: u16f(0x00),
            uid: u32::from(u16f(0x02)) | (u32::from(u16f(0x78)) << 16),
            gid: u32::from(u16f(0x18)) | (u32::from(u16f(0x7A)) << 16),
            size_lo: u32f(0x04),
            size_high: u32f(0x6C),
            atime: u32f(0x08),
            ctime: u32f(0x0C),
            mtime: u32f(0x10),
            dtime: u32f(0x14),
            crtime: ext(0x90),
            extra: [ext(0x8C), ext(0x84), ext(0x88), ext(0x94)],
            links: u16f(0x1A),
            flags: u32f(0x20),
            block,
            generation: u32f(0x64),
            blocks: u64::from(u32f(0x1C)) | (u64::from(u16f(0x74)) << 32),
            extra_isize,
        })
    }

    /// The type bits of the mode.
    pub fn file_type(&self) -> u16 {
        self.mode & S_IFMT
    }

    /// Whether the inode is a directory.
    pub fn is_dir(&self) -> bool {
        self.file_type() == S_IFDIR
    }

    /// The size as TSK reads it: `i_size_high` counts for regular files
    /// when the volume has `large_file`.
    pub fn size(&self, large_file: bool) -> u64 {
        let high = if self.file_type() == S_IFREG && large_file {
            u64::from(self.size_high) << 32
        } else {
            0
        };
        u64::from(self.size_lo) | high
    }

    /// A time from its seconds and `_extra` word: the two epoch bits widen
    /// the signed 32-bit seconds, the rest are nanoseconds. `extra_ok`
    /// false ignores the extra word (TSK reads ext2/ext3 that way).
    pub fn time(secs: u32, extra: u32, extra_ok: bool) -> Option<Timestamp> {
        if secs == 0 && (extra == 0 || !extra_ok) {
            return None;
        }
        if !extra_ok {
            return Some(Timestamp {
                secs: i64::from(secs),
                nanos: 0,
            });
        }
        let epoch = i64::from(extra & 3);
        let nanos = extra >> 2;
        Some(Timestamp {
            secs: i64::from(secs as i32) + (epoch << 32),
            nanos: if nanos < 1_000_000_000 { nanos } else { 0 },
        })
    }
}

/// Checks an inode's `metadata_csum` checksum: `Some((stored, computed))`
/// when they differ.
pub fn checksum_mismatch(raw: &[u8], inum: u32, seed: u32) -> Option<(u32, u32)> {
    if raw.len() < GOOD_OLD_INODE_SIZE {
        return None;
    }
    let generation = u32_at(raw, 0x64).unwrap_or(0);
    let extra = if raw.len() > GOOD_OLD_INODE_SIZE {
        usize::from(u16_at(raw, 0x80).unwrap_or(0))
    } else {
        0
    };
    let has_hi = raw.len() > GOOD_OLD_INODE_SIZE && extra >= 4;
    let mut crc = crc32c::update(seed, &inum.to_le_bytes());
    crc = crc32c::update(crc, &generation.to_le_bytes());
    crc = crc32c::update(crc, &raw[..0x7C]);
    crc = crc32c::update(crc, &[0, 0]);
    crc = crc32c::update(crc, &raw[0x7E..GOOD_OLD_INODE_SIZE]);
    let mut stored = u32::from(u16_at(raw, 0x7C).unwrap_or(0));
    if raw.len() > GOOD_OLD_INODE_SIZE {
        if has_hi {
            crc = crc32c::update(crc, &raw[GOOD_OLD_INODE_SIZE..0x82]);
            crc = crc32c::update(crc, &[0, 0]);
            crc = crc32c::update(crc, &raw[0x84..]);
            stored |= u32::from(u16_at(raw, 0x82).unwrap_or(0)) << 16;
        } else {
            crc = crc32c::update(crc, &raw[GOOD_OLD_INODE_SIZE..]);
        }
    }
    let computed = if has_hi { crc } else { crc & 0xFFFF };
    (computed != stored).then_some((stored, computed))
}

/// Finds the value of in-inode extended attribute `name` of namespace
/// `index` (7: `system`), every offset checked: the bytes after the
/// inode's extra fields.
pub fn inline_xattr<'a>(raw: &'a [u8], index: u8, name: &[u8]) -> Option<&'a [u8]> {
    let extra = usize::from(u16_at(raw, 0x80)?);
    let start = GOOD_OLD_INODE_SIZE.checked_add(extra)?;
    let area = raw.get(start..)?;
    if u32_at(area, 0)? != 0xEA02_0000 {
        return None;
    }
    let entries = area.get(4..)?;
    let mut pos = 0usize;
    // Each entry is at least 16 bytes; the list ends with four zero bytes.
    while pos + 16 <= entries.len() {
        if u32_at(entries, pos)? == 0 {
            break;
        }
        let name_len = usize::from(entries[pos]);
        let name_index = entries[pos + 1];
        let value_offs = usize::from(u16_at(entries, pos + 2)?);
        let value_inum = u32_at(entries, pos + 4)?;
        let value_size = usize::try_from(u32_at(entries, pos + 8)?).ok()?;
        let this_name = entries.get(pos + 16..pos + 16 + name_len)?;
        if name_index == index && this_name == name && value_inum == 0 {
            return entries.get(value_offs..value_offs.checked_add(value_size)?);
        }
        pos += (16 + name_len).div_ceil(4) * 4;
    }
    None
}
