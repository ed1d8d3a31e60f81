//! The head's own structures: group descriptors, the superblock, the
//! journal's superblock and inode map, the resize inode's block.

use super::{
    BLOCK, BLOCKS_PER_GROUP, DESC_SIZE, Ext4Params, FEATURE_COMPAT, FEATURE_INCOMPAT,
    FEATURE_RO_COMPAT, FIRST_INO, INODE_SIZE, Ids, JOURNAL_INO, LABEL, crc32c, inode, put16, put32,
};

/// Group `g`'s counts, as its descriptor states them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCounts {
    /// Free blocks.
    pub free_blocks: u32,
    /// Free inodes.
    pub free_inodes: u32,
    /// Directories.
    pub dirs: u32,
    /// Inodes never used at the table's end.
    pub itable_unused: u32,
    /// CRC-32C of the block bitmap.
    pub block_bitmap_csum: u32,
    /// CRC-32C of the inode bitmap.
    pub inode_bitmap_csum: u32,
}

/// One 64-byte group descriptor, with its checksum.
pub fn group_desc(p: &Ext4Params, ids: &Ids, g: u32, c: &GroupCounts) -> [u8; DESC_SIZE] {
    let mut d = [0u8; DESC_SIZE];
    let lo_hi = |d: &mut [u8; DESC_SIZE], lo: usize, hi: usize, v: u64| {
        put32(d, lo, v as u32);
        put32(d, hi, (v >> 32) as u32);
    };
    lo_hi(&mut d, 0x00, 0x20, p.block_bitmap(g));
    lo_hi(&mut d, 0x04, 0x24, p.inode_bitmap(g));
    lo_hi(&mut d, 0x08, 0x28, p.inode_table(g));
    put16(&mut d, 0x0C, c.free_blocks as u16);
    put16(&mut d, 0x2C, (c.free_blocks >> 16) as u16);
    put16(&mut d, 0x0E, c.free_inodes as u16);
    put16(&mut d, 0x2E, (c.free_inodes >> 16) as u16);
    put16(&mut d, 0x10, c.dirs as u16);
    put16(&mut d, 0x30, (c.dirs >> 16) as u16);
    // ITABLE_ZEROED: every inode table is written whole.
    put16(&mut d, 0x12, 0x4);
    put16(&mut d, 0x18, c.block_bitmap_csum as u16);
    put16(&mut d, 0x38, (c.block_bitmap_csum >> 16) as u16);
    put16(&mut d, 0x1A, c.inode_bitmap_csum as u16);
    put16(&mut d, 0x3A, (c.inode_bitmap_csum >> 16) as u16);
    put16(&mut d, 0x1C, c.itable_unused as u16);
    put16(&mut d, 0x32, (c.itable_unused >> 16) as u16);
    let mut crc = crc32c(ids.csum_seed(), &g.to_le_bytes());
    crc = crc32c(crc, &d);
    put16(&mut d, 0x1E, crc as u16);
    d
}

/// Totals the superblock states.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Free blocks.
    pub free_blocks: u64,
    /// Free inodes.
    pub free_inodes: u64,
}

/// The journal inode's `i_block` (one extent), as the superblock's backup
/// of it repeats.
pub fn journal_iblock(p: &Ext4Params) -> [u8; 60] {
    let map = inode::mapping([(0, p.journal_blocks as u64, p.journal_block())]);
    let mut b = [0u8; 60];
    inode::extent_header(&mut b[..12], map.len() as u16, 4, 0);
    for (i, &(l, n, at)) in map.iter().enumerate() {
        inode::extent_leaf(&mut b[12 + 12 * i..24 + 12 * i], l as u32, n as u32, at);
    }
    b
}

/// The 1,024-byte superblock (at byte 1,024 of block 0), with its
/// checksum.
pub fn superblock(p: &Ext4Params, ids: &Ids, t: &Totals) -> [u8; 1024] {
    let mut s = [0u8; 1024];
    put32(&mut s, 0x00, p.inodes() as u32);
    put32(&mut s, 0x04, p.blocks as u32);
    put32(&mut s, 0x150, (p.blocks >> 32) as u32);
    let r = p.reserved_blocks();
    put32(&mut s, 0x08, r as u32);
    put32(&mut s, 0x154, (r >> 32) as u32);
    put32(&mut s, 0x0C, t.free_blocks as u32);
    put32(&mut s, 0x158, (t.free_blocks >> 32) as u32);
    put32(&mut s, 0x10, t.free_inodes as u32);
    put32(&mut s, 0x14, 0);
    put32(&mut s, 0x18, 2);
    put32(&mut s, 0x1C, 2);
    put32(&mut s, 0x20, BLOCKS_PER_GROUP as u32);
    put32(&mut s, 0x24, BLOCKS_PER_GROUP as u32);
    put32(&mut s, 0x28, p.inodes_per_group);
    put32(&mut s, 0x30, ids.created);
    put16(&mut s, 0x36, 0xFFFF);
    put16(&mut s, 0x38, 0xEF53);
    put16(&mut s, 0x3A, 1);
    put16(&mut s, 0x3C, 1);
    put32(&mut s, 0x40, ids.created);
    put32(&mut s, 0x4C, 1);
    put32(&mut s, 0x54, FIRST_INO);
    put16(&mut s, 0x58, INODE_SIZE as u16);
    put32(&mut s, 0x5C, FEATURE_COMPAT);
    put32(&mut s, 0x60, FEATURE_INCOMPAT);
    put32(&mut s, 0x64, FEATURE_RO_COMPAT);
    s[0x68..0x78].copy_from_slice(&ids.uuid);
    s[0x78..0x78 + LABEL.len()].copy_from_slice(LABEL.as_bytes());
    put16(&mut s, 0xCE, p.reserved_gdt as u16);
    put32(&mut s, 0xE0, JOURNAL_INO);
    for (i, w) in ids.hash_seed.iter().enumerate() {
        put32(&mut s, 0xEC + 4 * i, *w);
    }
    // half_md4; the journal's inode blocks backed up here.
    s[0xFC] = 1;
    s[0xFD] = 1;
    put16(&mut s, 0xFE, DESC_SIZE as u16);
    // user_xattr and acl.
    put32(&mut s, 0x100, 0x4 | 0x8);
    put32(&mut s, 0x108, ids.created);
    s[0x10C..0x10C + 60].copy_from_slice(&journal_iblock(p));
    let jsize = p.journal_blocks as u64 * BLOCK;
    put32(&mut s, 0x10C + 60, (jsize >> 32) as u32);
    put32(&mut s, 0x10C + 64, jsize as u32);
    put16(&mut s, 0x15C, 32);
    put16(&mut s, 0x15E, 32);
    // Signed directory hash (x86's char, as mkfs there records it).
    put32(&mut s, 0x160, 0x1);
    s[0x174] = p.log_flex;
    // CRC-32C.
    s[0x175] = 1;
    // sparse_super2 with no backup groups: s_backup_bgs stays zero.
    let crc = crc32c(!0, &s[..0x3FC]);
    put32(&mut s, 0x3FC, crc);
    s
}

/// The journal's superblock (jbd2, big-endian): an empty, clean journal
/// as mkfs writes it (no transactions, sequence 1, start 0).
pub fn journal_superblock(p: &Ext4Params, ids: &Ids) -> Vec<u8> {
    let mut j = vec![0u8; BLOCK as usize];
    let be = |j: &mut Vec<u8>, at: usize, v: u32| j[at..at + 4].copy_from_slice(&v.to_be_bytes());
    be(&mut j, 0x00, 0xC03B_3998);
    be(&mut j, 0x04, 4);
    be(&mut j, 0x0C, BLOCK as u32);
    be(&mut j, 0x10, p.journal_blocks);
    be(&mut j, 0x14, 1);
    be(&mut j, 0x18, 1);
    j[0x30..0x40].copy_from_slice(&ids.uuid);
    be(&mut j, 0x40, 1);
    j
}

/// The resize inode's double-indirect block: one entry per reserved GDT
/// block (at its place in the descriptor table's growth), naming it.
pub fn resize_dind_block(p: &Ext4Params) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK as usize];
    let apb = BLOCK / 4;
    for r in 0..p.reserved_gdt as u64 {
        let off = (p.desc_blocks as u64 + r) % apb;
        let blk = 1 + p.desc_blocks as u64 + r;
        put32(&mut b, off as usize * 4, blk as u32);
    }
    b
}
