//! ext4 on-disk structures as `mkfs.ext4` (e2fsprogs 1.47, this machine's
//! `/etc/mke2fs.conf`) makes them by default for a 4 KiB-block volume:
//! `has_journal ext_attr resize_inode dir_index filetype extent 64bit
//! flex_bg sparse_super large_file huge_file dir_nlink extra_isize
//! metadata_csum`, 256-byte inodes, one inode per 16 KiB, 5% reserved,
//! half-MD4 directory hashes (signed), CRC-32C checksums on every
//! structure.
//!
//! Two choices differ from a plain `mkfs.ext4` run, and equal what
//! `mkfs.ext4 -O sparse_super2 -E num_backup_sb=0 -G <groups>` makes:
//! there are no backup superblocks (`sparse_super2` with no backup
//! groups) and one flex group holds every group's bitmaps and inode
//! table (mkfs's default of 16 groups per flex group, widened past 2 GiB),
//! so that the whole of the file system's own metadata lies at the
//! volume's start and the planner's clusters are one contiguous run of
//! blocks after it. The journal lies there too (mkfs puts it in the
//! middle group). Below 512 MiB mkfs's `small` type would pick 1 KiB
//! blocks; corpora keep 4 KiB blocks at every size.
//!
//! Layout of the head, in blocks: the superblock (block 0, at byte 1024),
//! the group descriptors, the reserved GDT blocks, every group's block
//! bitmap, every group's inode bitmap, every group's inode table, the
//! resize inode's double-indirect block, lost+found's four blocks and the
//! journal. The planner's cluster 2 is the block after the journal.

pub mod dir;
pub mod head;
pub mod inode;
pub mod layout;
pub mod write;

/// Bytes per block.
pub const BLOCK: u64 = 4096;
/// Blocks per group.
pub const BLOCKS_PER_GROUP: u64 = 32_768;
/// Bytes per inode.
pub const INODE_SIZE: usize = 256;
/// Bytes of volume per inode (mke2fs.conf's `inode_ratio`).
pub const INODE_RATIO: u64 = 16_384;
/// Bytes of one group descriptor (64bit).
pub const DESC_SIZE: usize = 64;
/// The first inode a file may take (1 to 10 are reserved).
pub const FIRST_INO: u32 = 11;
/// The root directory's inode.
pub const ROOT_INO: u32 = 2;
/// The resize inode.
pub const RESIZE_INO: u32 = 7;
/// The journal's inode.
pub const JOURNAL_INO: u32 = 8;
/// lost+found's inode (the first non-reserved one, as mkfs gives it).
pub const LPF_INO: u32 = 11;
/// Blocks of lost+found (mkfs makes it 16 KiB).
pub const LPF_BLOCKS: u64 = 4;
/// Longest symbolic-link target kept in the inode (`i_block`'s 60
/// bytes, a fast symlink); a longer one takes a block.
pub const FAST_LINK_MAX: u64 = 59;
/// The volume label every corpus carries.
pub const LABEL: &str = "CASELOAD";
/// Smallest disk an ext4 corpus accepts.
pub const MIN_DISK: u64 = 32 << 20;

/// Compatible features: has_journal, ext_attr, resize_inode, dir_index,
/// sparse_super2.
pub const FEATURE_COMPAT: u32 = 0x4 | 0x8 | 0x10 | 0x20 | 0x200;
/// Incompatible features: filetype, extent, 64bit, flex_bg.
pub const FEATURE_INCOMPAT: u32 = 0x2 | 0x40 | 0x80 | 0x200;
/// Read-only compatible features: sparse_super, large_file, huge_file,
/// dir_nlink, extra_isize, metadata_csum.
pub const FEATURE_RO_COMPAT: u32 = 0x1 | 0x2 | 0x8 | 0x20 | 0x40 | 0x400;

/// Inode flag: the inode uses extents.
pub const FLAG_EXTENTS: u32 = 0x8_0000;
/// Inode flag: a hashed-index directory.
pub const FLAG_INDEX: u32 = 0x1000;

/// Seconds between 1970 and 1980 (the planner's stamps count from 1980).
pub const TO_1980: u64 = 315_532_800;

/// The raw CRC-32C register update ext4 uses (no pre- or post-inversion).
pub fn crc32c(crc: u32, data: &[u8]) -> u32 {
    !crc32c::crc32c_append(!crc, data)
}

/// Little-endian stores into a fixed structure.
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Where ext4 puts its structures on a volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ext4Params {
    /// Blocks in the file system.
    pub blocks: u64,
    /// Block groups.
    pub groups: u32,
    /// Inodes per group.
    pub inodes_per_group: u32,
    /// Blocks of the group descriptor table.
    pub desc_blocks: u32,
    /// Reserved GDT blocks (for online growth; the resize inode holds them).
    pub reserved_gdt: u32,
    /// log2 of groups per flex group.
    pub log_flex: u8,
    /// Journal blocks.
    pub journal_blocks: u32,
    /// The volume's identity (UUID, hash seed, creation time).
    pub ids: Ids,
}

impl Ext4Params {
    /// The layout for a volume of `volume_bytes`; `None` when it is too
    /// small to hold its own metadata and some files.
    pub fn for_volume(volume_bytes: u64) -> Option<Ext4Params> {
        let mut blocks = volume_bytes / BLOCK;
        // mkfs drops a last group too small to be worth its metadata.
        let rem = blocks % BLOCKS_PER_GROUP;
        if blocks > BLOCKS_PER_GROUP && rem > 0 && rem < 1024 {
            blocks -= rem;
        }
        if blocks < 2048 || blocks > u32::MAX as u64 * 8 {
            return None;
        }
        let groups = blocks.div_ceil(BLOCKS_PER_GROUP);
        let inodes = blocks * BLOCK / INODE_RATIO;
        let per_block = (BLOCK as usize / INODE_SIZE) as u64;
        let ipg = inodes
            .div_ceil(groups)
            .next_multiple_of(per_block)
            .clamp(per_block, BLOCKS_PER_GROUP);
        if ipg * groups > u32::MAX as u64 {
            return None;
        }
        let per_desc_block = BLOCK / DESC_SIZE as u64;
        let desc_blocks = groups.div_ceil(per_desc_block);
        // e2fsprogs' calc_reserved_gdt_blocks: room to grow 1024-fold
        // (to 2^32 blocks at most), at most one indirect block's worth.
        let max_blocks = if blocks < 0xFFFF_FFFF / 1024 {
            blocks * 1024
        } else {
            0xFFFF_FFFF
        };
        let rsv_groups = max_blocks.div_ceil(BLOCKS_PER_GROUP);
        let reserved_gdt = (rsv_groups
            .div_ceil(per_desc_block)
            .saturating_sub(desc_blocks))
        .min(BLOCK / 4);
        let log_flex = (groups.next_power_of_two().trailing_zeros() as u8).max(4);
        let journal_blocks = journal_blocks_for(blocks)?;
        let p = Ext4Params {
            blocks,
            groups: groups as u32,
            inodes_per_group: ipg as u32,
            desc_blocks: desc_blocks as u32,
            reserved_gdt: reserved_gdt as u32,
            log_flex,
            journal_blocks,
            ids: Ids::default(),
        };
        // The head must leave room for files in group 0's reach.
        if p.head_blocks() + 1024 > blocks {
            return None;
        }
        Some(p)
    }

    /// Inodes in the file system.
    pub fn inodes(&self) -> u64 {
        self.groups as u64 * self.inodes_per_group as u64
    }

    /// Blocks of one group's inode table.
    pub fn itable_blocks(&self) -> u64 {
        self.inodes_per_group as u64 * INODE_SIZE as u64 / BLOCK
    }

    /// Blocks of group `g`.
    pub fn group_blocks(&self, g: u32) -> u64 {
        (self.blocks - g as u64 * BLOCKS_PER_GROUP).min(BLOCKS_PER_GROUP)
    }

    /// First block after the superblock, descriptors and reserved GDT.
    fn meta(&self) -> u64 {
        1 + self.desc_blocks as u64 + self.reserved_gdt as u64
    }

    /// Group `g`'s block bitmap.
    pub fn block_bitmap(&self, g: u32) -> u64 {
        self.meta() + g as u64
    }

    /// Group `g`'s inode bitmap.
    pub fn inode_bitmap(&self, g: u32) -> u64 {
        self.meta() + self.groups as u64 + g as u64
    }

    /// Group `g`'s inode table.
    pub fn inode_table(&self, g: u32) -> u64 {
        self.meta() + 2 * self.groups as u64 + g as u64 * self.itable_blocks()
    }

    /// The resize inode's double-indirect block.
    pub fn resize_dind(&self) -> u64 {
        self.inode_table(self.groups)
    }

    /// lost+found's first block.
    pub fn lpf_block(&self) -> u64 {
        self.resize_dind() + 1
    }

    /// The journal's first block.
    pub fn journal_block(&self) -> u64 {
        self.lpf_block() + LPF_BLOCKS
    }

    /// Blocks before the planner's cluster 2.
    pub fn head_blocks(&self) -> u64 {
        self.journal_block() + self.journal_blocks as u64
    }

    /// The ext4 block of planner cluster `c` (c ≥ 2).
    pub fn block(&self, c: u32) -> u64 {
        self.head_blocks() + c as u64 - 2
    }

    /// Blocks reserved for the superuser (5%).
    pub fn reserved_blocks(&self) -> u64 {
        self.blocks * 5 / 100
    }
}

/// e2fsprogs' default journal size (ext2fs_default_journal_size) for a
/// file system of `blocks` 4 KiB blocks.
fn journal_blocks_for(blocks: u64) -> Option<u32> {
    Some(match blocks {
        b if b < 2048 => return None,
        b if b < 32_768 => 1024,
        b if b < 256 * 1024 => 4096,
        b if b < 512 * 1024 => 8192,
        b if b < 4096 * 1024 => 16_384,
        b if b < 8192 * 1024 => 32_768,
        b if b < 16_384 * 1024 => 65_536,
        b if b < 32_768 * 1024 => 131_072,
        // Past 128 GiB mkfs makes 1 GiB; the journal's extents must fit
        // the inode's four here: 512 MiB.
        _ => 131_072,
    })
}

/// The identity a volume is written with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Ids {
    /// File-system UUID.
    pub uuid: [u8; 16],
    /// Directory hash seed.
    pub hash_seed: [u32; 4],
    /// Creation time (Unix seconds).
    pub created: u32,
}

impl Ids {
    /// The metadata checksum seed: CRC-32C of the UUID.
    pub fn csum_seed(&self) -> u32 {
        crc32c(!0, &self.uuid)
    }
}

/// Bit helpers over a bitmap held in bytes.
pub fn set_bit(map: &mut [u8], i: u64) {
    map[(i / 8) as usize] |= 1 << (i % 8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_match_mkfs_for_1_gib() {
        // mkfs.ext4 1.47.0 on a 1 GiB file: 8 groups of 8,192 inodes,
        // 127 reserved GDT blocks, bitmaps at 129 and 137, inode tables
        // from 145, an 8,192-block journal.
        let p = Ext4Params::for_volume(1 << 30).unwrap();
        assert_eq!(p.groups, 8);
        assert_eq!(p.inodes_per_group, 8192);
        assert_eq!(p.reserved_gdt, 127);
        assert_eq!(p.block_bitmap(0), 129);
        assert_eq!(p.inode_bitmap(0), 137);
        assert_eq!(p.inode_table(0), 145);
        assert_eq!(p.inode_table(1), 657);
        assert_eq!(p.journal_blocks, 8192);
        assert_eq!(p.reserved_blocks(), 13_107);
    }

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(!crc32c(!0, b"123456789"), 0xE306_9283);
    }
}
