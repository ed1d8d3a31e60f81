//! The ext2/3/4 superblock: every field the reader relies on, range-checked
//! before use.

use crate::bytes::{u16_at, u32_at};

/// Byte offset of the primary superblock from the start of the volume.
pub const SUPERBLOCK_OFFSET: u64 = 1024;
/// Bytes of the superblock.
pub const SUPERBLOCK_LEN: usize = 1024;
const MAGIC: u16 = 0xEF53;

/// `s_feature_compat`: a journal (ext3/4).
pub const COMPAT_HAS_JOURNAL: u32 = 0x4;
/// `s_feature_incompat`: directory entries carry a file type byte.
pub const INCOMPAT_FILETYPE: u32 = 0x2;
/// `s_feature_incompat`: the journal needs replaying (not done here).
pub const INCOMPAT_RECOVER: u32 = 0x4;
/// `s_feature_incompat`: this is an external journal device.
pub const INCOMPAT_JOURNAL_DEV: u32 = 0x8;
/// `s_feature_incompat`: group descriptors are spread over meta groups.
pub const INCOMPAT_META_BG: u32 = 0x10;
/// `s_feature_incompat`: files may be mapped by extent trees.
pub const INCOMPAT_EXTENTS: u32 = 0x40;
/// `s_feature_incompat`: 64-bit block numbers and group descriptors.
pub const INCOMPAT_64BIT: u32 = 0x80;
/// `s_feature_incompat`: flexible block groups.
pub const INCOMPAT_FLEX_BG: u32 = 0x200;
/// `s_feature_incompat`: the checksum seed is stored in the superblock.
pub const INCOMPAT_CSUM_SEED: u32 = 0x2000;
/// `s_feature_incompat`: small files and directories stored in the inode.
pub const INCOMPAT_INLINE_DATA: u32 = 0x8000;
/// `s_feature_incompat`: encrypted names and contents.
pub const INCOMPAT_ENCRYPT: u32 = 0x1_0000;
/// `s_feature_ro_compat`: superblock backups only in some groups.
pub const RO_COMPAT_SPARSE_SUPER: u32 = 0x1;
/// `s_feature_ro_compat`: regular files may exceed 2 GiB (`i_size_high`).
pub const RO_COMPAT_LARGE_FILE: u32 = 0x2;
/// `s_feature_ro_compat`: `i_blocks` in file-system blocks for huge files.
pub const RO_COMPAT_HUGE_FILE: u32 = 0x8;
/// `s_feature_ro_compat`: group descriptor checksums (crc16).
pub const RO_COMPAT_GDT_CSUM: u32 = 0x10;
/// `s_feature_ro_compat`: allocation in clusters of blocks.
pub const RO_COMPAT_BIGALLOC: u32 = 0x200;
/// `s_feature_ro_compat`: crc32c checksums on metadata.
pub const RO_COMPAT_METADATA_CSUM: u32 = 0x400;

/// The superblock fields the reader uses, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Superblock {
    /// Inodes in the file system.
    pub inodes_count: u32,
    /// Blocks in the file system.
    pub blocks_count: u64,
    /// First block of group 0 (1 with 1 KiB blocks, else 0).
    pub first_data_block: u32,
    /// Bytes per block (1 KiB to 64 KiB).
    pub block_size: u64,
    /// Blocks per group.
    pub blocks_per_group: u32,
    /// Inodes per group.
    pub inodes_per_group: u32,
    /// Revision (0: fixed 128-byte inodes, first inode 11).
    pub rev_level: u32,
    /// First non-reserved inode.
    pub first_ino: u32,
    /// Bytes per on-disk inode.
    pub inode_size: u32,
    /// Feature flags.
    pub compat: u32,
    /// Feature flags a reader must understand.
    pub incompat: u32,
    /// Feature flags a writer must understand.
    pub ro_compat: u32,
    /// Volume UUID.
    pub uuid: [u8; 16],
    /// Volume label (up to the first NUL).
    pub label: String,
    /// Inode of the journal (0 without one).
    pub journal_inum: u32,
    /// Bytes per group descriptor (32, or 64+ with `64bit`).
    pub desc_size: u32,
    /// Blocks reserved after the descriptors for growth.
    pub reserved_gdt_blocks: u32,
    /// First meta group (with `meta_bg`).
    pub first_meta_bg: u32,
    /// log2 of groups per flex group.
    pub log_groups_per_flex: u8,
    /// Stored `s_checksum_seed` (used with `csum_seed`).
    pub checksum_seed: u32,
    /// Stored superblock checksum.
    pub checksum: u32,
    /// Block groups.
    pub group_count: u64,
}

impl Superblock {
    /// Parses and range-checks the 1024 bytes of a superblock. The reason
    /// names the field that fails.
    pub fn parse(b: &[u8]) -> Result<Self, String> {
        if b.len() < SUPERBLOCK_LEN {
            return Err(format!("only {} bytes of superblock", b.len()));
        }
        let u32f = |o| u32_at(b, o).unwrap_or(0);
        let u16f = |o| u16_at(b, o).unwrap_or(0);
        if u16f(0x38) != MAGIC {
            return Err(format!("magic {:#06x} is not 0xef53", u16f(0x38)));
        }
        let compat = u32f(0x5C);
        let incompat = u32f(0x60);
        let ro_compat = u32f(0x64);
        let log_block = u32f(0x18);
        if log_block > 6 {
            return Err(format!("s_log_block_size {log_block}: blocks over 64 KiB"));
        }
        let block_size = 1024u64 << log_block;
        if ro_compat & RO_COMPAT_BIGALLOC != 0 || u32f(0x1C) != log_block {
            return Err("clusters larger than blocks (bigalloc) are not supported".to_string());
        }
        if incompat & INCOMPAT_JOURNAL_DEV != 0 {
            return Err("an external journal device holds no files".to_string());
        }
        let inodes_count = u32f(0x00);
        if inodes_count < 10 {
            return Err(format!("s_inodes_count {inodes_count} is under 10"));
        }
        let is64 = incompat & INCOMPAT_64BIT != 0;
        let blocks_count = u64::from(u32f(0x04))
            | if is64 {
                u64::from(u32f(0x150)) << 32
            } else {
                0
            };
        let first_data_block = u32f(0x14);
        if u64::from(first_data_block) >= blocks_count || first_data_block > 1 {
            return Err(format!(
                "s_first_data_block {first_data_block} with {blocks_count} blocks"
            ));
        }
        let bits = 8 * block_size;
        let blocks_per_group = u32f(0x20);
        if blocks_per_group < 8 || u64::from(blocks_per_group) > bits || blocks_per_group % 8 != 0 {
            return Err(format!(
                "s_blocks_per_group {blocks_per_group} outside 8..={bits} or not a multiple of 8"
            ));
        }
        let inodes_per_group = u32f(0x28);
        if inodes_per_group == 0 || u64::from(inodes_per_group) > bits {
            return Err(format!(
                "s_inodes_per_group {inodes_per_group} outside 1..={bits}"
            ));
        }
        let rev_level = u32f(0x4C);
        let (first_ino, inode_size) = if rev_level == 0 {
            (11, 128)
        } else {
            (u32f(0x54), u32::from(u16f(0x58)))
        };
        if !(128..=block_size).contains(&u64::from(inode_size)) || !inode_size.is_power_of_two() {
            return Err(format!(
                "s_inode_size {inode_size}: not a power of two in 128..={block_size}"
            ));
        }
        if first_ino < 3 || first_ino > inodes_count {
            return Err(format!(
                "s_first_ino {first_ino} outside 3..={inodes_count}"
            ));
        }
        let desc_size = if is64 {
            let d = u32::from(u16f(0xFE));
            if !(64..=1024).contains(&d) || !d.is_power_of_two() || u64::from(d) > block_size {
                return Err(format!("s_desc_size {d} with 64bit"));
            }
            d
        } else {
            32
        };
        let group_count =
            (blocks_count - u64::from(first_data_block)).div_ceil(u64::from(blocks_per_group));
        if group_count * u64::from(inodes_per_group) < u64::from(inodes_count) {
            return Err(format!(
                "{group_count} groups of {inodes_per_group} inodes cannot hold s_inodes_count {inodes_count}"
            ));
        }
        let log_groups_per_flex = b[0x174];
        if incompat & INCOMPAT_FLEX_BG != 0 && log_groups_per_flex > 31 {
            return Err(format!("s_log_groups_per_flex {log_groups_per_flex}"));
        }
        let mut uuid = [0u8; 16];
        uuid.copy_from_slice(&b[0x68..0x78]);
        let label_bytes = &b[0x78..0x88];
        let end = label_bytes.iter().position(|&c| c == 0).unwrap_or(16);
        Ok(Superblock {
            inodes_count,
            blocks_count,
            first_data_block,
            block_size,
            blocks_per_group,
            inodes_per_group,
            rev_level,
            first_ino,
            inode_size,
            compat,
            incompat,
            ro_compat,
            uuid,
            label: String::from_utf8_lossy(&label_bytes[..end]).into_owned(),
            journal_inum: u32f(0xE0),
            desc_size,
            reserved_gdt_blocks: u32::from(u16f(0xCE)),
            first_meta_bg: u32f(0x104),
            log_groups_per_flex,
            checksum_seed: u32f(0x270),
            checksum: u32f(0x3FC),
            group_count,
        })
    }

    /// Whether a feature of `s_feature_incompat` is set.
    pub fn has_incompat(&self, f: u32) -> bool {
        self.incompat & f != 0
    }

    /// Whether a feature of `s_feature_ro_compat` is set.
    pub fn has_ro_compat(&self, f: u32) -> bool {
        self.ro_compat & f != 0
    }

    /// Whether metadata carries crc32c checksums.
    pub fn metadata_csum(&self) -> bool {
        self.has_ro_compat(RO_COMPAT_METADATA_CSUM)
    }

    /// Whether group `g` holds a superblock backup (every group without
    /// `sparse_super`; else groups 0, 1 and powers of 3, 5 and 7).
    pub fn has_super(&self, g: u64) -> bool {
        if !self.has_ro_compat(RO_COMPAT_SPARSE_SUPER) || g <= 1 {
            return true;
        }
        [3u64, 5, 7].iter().any(|&p| {
            let mut x = p;
            while x < g {
                x = x.saturating_mul(p);
            }
            x == g
        })
    }

    /// Group descriptors per block.
    pub fn descs_per_block(&self) -> u64 {
        self.block_size / u64::from(self.desc_size)
    }

    /// Blocks the group descriptor table fills.
    pub fn gdt_blocks(&self) -> u64 {
        self.group_count.div_ceil(self.descs_per_block())
    }

    /// First block of group `g`.
    pub fn group_first_block(&self, g: u64) -> u64 {
        u64::from(self.first_data_block) + g * u64::from(self.blocks_per_group)
    }

    /// Blocks in group `g` (the last may be short).
    pub fn group_blocks(&self, g: u64) -> u64 {
        let first = self.group_first_block(g);
        u64::from(self.blocks_per_group).min(self.blocks_count.saturating_sub(first))
    }

    /// Block holding group descriptor `g`, and the descriptor's byte
    /// offset in it.
    pub fn desc_location(&self, g: u64) -> (u64, u64) {
        let per = self.descs_per_block();
        let mb = g / per;
        let within = (g % per) * u64::from(self.desc_size);
        if self.has_incompat(INCOMPAT_META_BG) && mb >= u64::from(self.first_meta_bg) {
            let first = mb * per;
            let block = self.group_first_block(first) + u64::from(self.has_super(first));
            (block, within)
        } else {
            (u64::from(self.first_data_block) + 1 + mb, within)
        }
    }

    /// Blocks at the start of group `g` taken by the superblock backup,
    /// descriptors and reserved descriptor blocks.
    pub fn group_header_blocks(&self, g: u64) -> u64 {
        if !self.has_super(g) {
            return 0;
        }
        if self.has_incompat(INCOMPAT_META_BG) {
            // One descriptor block for groups that start a meta group, in
            // the first, second and last group of it.
            let per = self.descs_per_block();
            let r = g % per;
            let mut n = 1;
            if g / per >= u64::from(self.first_meta_bg) && (r == 0 || r == 1 || r == per - 1) {
                n += 1;
            }
            if g / per < u64::from(self.first_meta_bg) {
                n += u64::from(self.first_meta_bg) + u64::from(self.reserved_gdt_blocks);
            }
            return n;
        }
        1 + self.gdt_blocks() + u64::from(self.reserved_gdt_blocks)
    }
}
