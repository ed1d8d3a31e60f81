//! ext4 inodes (256 bytes: the 128-byte base, 32 bytes of extra fields
//! with nanosecond times and the creation time, and in-inode extended
//! attributes in the rest) and extent trees.

use super::{BLOCK, FLAG_EXTENTS, INODE_SIZE, crc32c, put16, put32};

/// Extent tree magic.
const EXTENT_MAGIC: u16 = 0xF30A;
/// Extents in the inode's own `i_block`.
pub const INODE_EXTENTS: usize = 4;
/// Extents in one 4 KiB tree block (its last 4 bytes are the checksum).
pub const BLOCK_EXTENTS: usize = (BLOCK as usize - 12 - 4) / 12;
/// Longest initialized extent.
pub const MAX_EXTENT: u64 = 32_768;
/// Where in-inode extended attributes start (after the 32 extra bytes).
const XATTR_AT: usize = 0x80 + 32;

/// An extent tree header.
pub fn extent_header(b: &mut [u8], entries: u16, max: u16, depth: u16) {
    put16(b, 0, EXTENT_MAGIC);
    put16(b, 2, entries);
    put16(b, 4, max);
    put16(b, 6, depth);
    put32(b, 8, 0);
}

/// A leaf extent: `len` blocks of the file from `logical` at `phys`.
pub fn extent_leaf(b: &mut [u8], logical: u32, len: u32, phys: u64) {
    put32(b, 0, logical);
    put16(b, 4, len as u16);
    put16(b, 6, (phys >> 32) as u16);
    put32(b, 8, phys as u32);
}

/// An index entry: the tree block at `phys` covers the file from
/// `logical`.
fn extent_index(b: &mut [u8], logical: u32, phys: u64) {
    put32(b, 0, logical);
    put32(b, 4, phys as u32);
    put16(b, 8, (phys >> 32) as u16);
    put16(b, 10, 0);
}

/// A file's mapping, in file order: (first logical block, length, first
/// physical block); adjacent runs are merged and long ones split at
/// 32,768 blocks.
pub fn mapping(runs: impl IntoIterator<Item = (u64, u64, u64)>) -> Vec<(u64, u64, u64)> {
    let mut out: Vec<(u64, u64, u64)> = Vec::new();
    for (logical, len, phys) in runs {
        if len == 0 {
            continue;
        }
        if let Some(last) = out.last_mut()
            && last.0 + last.1 == logical
            && last.2 + last.1 == phys
            && last.1 + len <= MAX_EXTENT
        {
            last.1 += len;
            continue;
        }
        let mut done = 0;
        while done < len {
            let take = (len - done).min(MAX_EXTENT);
            out.push((logical + done, take, phys + done));
            done += take;
        }
    }
    out
}

/// Tree blocks a mapping of `extents` extents needs beyond the inode.
pub fn tree_blocks(extents: usize) -> usize {
    if extents <= INODE_EXTENTS {
        0
    } else {
        extents.div_ceil(BLOCK_EXTENTS)
    }
}

/// An extent tree: the inode's `i_block` and the tree blocks (depth 1
/// when more than four extents), each at its block number.
pub struct Tree {
    /// The inode's `i_block`.
    pub iblock: [u8; 60],
    /// Leaf blocks and where they go.
    pub blocks: Vec<(u64, Vec<u8>)>,
}

/// Build the tree of `map`, its leaves (if any) in `leaf_at`, checksummed
/// with the inode's seed `ino_seed`. `None` when the leaves would need
/// more than four blocks or `leaf_at` is short.
pub fn tree(map: &[(u64, u64, u64)], leaf_at: &[u64], ino_seed: u32) -> Option<Tree> {
    let mut iblock = [0u8; 60];
    if map.len() <= INODE_EXTENTS {
        extent_header(&mut iblock[..12], map.len() as u16, INODE_EXTENTS as u16, 0);
        for (i, &(l, n, p)) in map.iter().enumerate() {
            extent_leaf(&mut iblock[12 + 12 * i..24 + 12 * i], l as u32, n as u32, p);
        }
        return Some(Tree {
            iblock,
            blocks: Vec::new(),
        });
    }
    let chunks: Vec<&[(u64, u64, u64)]> = map.chunks(BLOCK_EXTENTS).collect();
    if chunks.len() > INODE_EXTENTS || leaf_at.len() < chunks.len() {
        return None;
    }
    extent_header(
        &mut iblock[..12],
        chunks.len() as u16,
        INODE_EXTENTS as u16,
        1,
    );
    let mut blocks = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let at = leaf_at[i];
        extent_index(&mut iblock[12 + 12 * i..24 + 12 * i], chunk[0].0 as u32, at);
        let mut b = vec![0u8; BLOCK as usize];
        extent_header(&mut b[..12], chunk.len() as u16, BLOCK_EXTENTS as u16, 0);
        for (j, &(l, n, p)) in chunk.iter().enumerate() {
            extent_leaf(&mut b[12 + 12 * j..24 + 12 * j], l as u32, n as u32, p);
        }
        let tail = 12 + 12 * BLOCK_EXTENTS;
        let crc = crc32c(ino_seed, &b[..tail]);
        put32(&mut b, tail, crc);
        blocks.push((at, b));
    }
    Some(Tree { iblock, blocks })
}

/// A time as ext4 stores it: seconds, and the extra word (nanoseconds
/// shifted left by two, the epoch bits for years past 2038).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Time {
    /// Seconds since 1970 (UTC).
    pub secs: i64,
    /// Nanoseconds.
    pub nanos: u32,
}

impl Time {
    fn lo(&self) -> u32 {
        self.secs as u32
    }
    fn extra(&self) -> u32 {
        let epoch = ((self.secs - (self.secs as i32) as i64) >> 32) as u32 & 3;
        (self.nanos << 2) | epoch
    }
}

/// One extended attribute stored in the inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xattr {
    /// Name index (1 `user.`, 6 `security.`).
    pub index: u8,
    /// Name after the prefix.
    pub name: Vec<u8>,
    /// Value.
    pub value: Vec<u8>,
}

/// What an inode holds.
#[derive(Debug, Clone)]
pub struct Inode {
    /// Type and permission bits.
    pub mode: u16,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// Hard links.
    pub links: u16,
    /// Access time.
    pub atime: Time,
    /// Change time.
    pub ctime: Time,
    /// Modification time.
    pub mtime: Time,
    /// Creation time.
    pub crtime: Time,
    /// Deletion time (0 while live).
    pub dtime: u32,
    /// Flags.
    pub flags: u32,
    /// `i_block`: extent tree root, or a fast symlink's target.
    pub iblock: [u8; 60],
    /// 512-byte sectors allocated (data and tree blocks).
    pub sectors: u64,
    /// Generation (feeds the checksum).
    pub generation: u32,
    /// In-inode extended attributes.
    pub xattrs: Vec<Xattr>,
}

impl Default for Inode {
    fn default() -> Self {
        Inode {
            mode: 0,
            uid: 0,
            gid: 0,
            size: 0,
            links: 0,
            atime: Time::default(),
            ctime: Time::default(),
            mtime: Time::default(),
            crtime: Time::default(),
            dtime: 0,
            flags: 0,
            iblock: [0; 60],
            sectors: 0,
            generation: 0,
            xattrs: Vec::new(),
        }
    }
}

/// The per-inode checksum seed (metadata checksum seed, inode number,
/// generation): directory blocks and extent blocks of the inode use it.
pub fn ino_seed(csum_seed: u32, ino: u32, generation: u32) -> u32 {
    let c = crc32c(csum_seed, &ino.to_le_bytes());
    crc32c(c, &generation.to_le_bytes())
}

impl Inode {
    /// A live inode whose data the extent tree `iblock` maps.
    pub fn with_extents(mut self, iblock: [u8; 60]) -> Self {
        self.flags |= FLAG_EXTENTS;
        self.iblock = iblock;
        self
    }

    /// The 256 bytes of inode `ino`, checksummed.
    pub fn encode(&self, ino: u32, csum_seed: u32) -> [u8; INODE_SIZE] {
        let mut b = [0u8; INODE_SIZE];
        put16(&mut b, 0x00, self.mode);
        put16(&mut b, 0x02, self.uid as u16);
        put32(&mut b, 0x04, self.size as u32);
        put32(&mut b, 0x08, self.atime.lo());
        put32(&mut b, 0x0C, self.ctime.lo());
        put32(&mut b, 0x10, self.mtime.lo());
        put32(&mut b, 0x14, self.dtime);
        put16(&mut b, 0x18, self.gid as u16);
        put16(&mut b, 0x1A, self.links);
        put32(&mut b, 0x1C, self.sectors as u32);
        put32(&mut b, 0x20, self.flags);
        b[0x28..0x64].copy_from_slice(&self.iblock);
        put32(&mut b, 0x64, self.generation);
        put32(&mut b, 0x6C, (self.size >> 32) as u32);
        put16(&mut b, 0x74, (self.sectors >> 32) as u16);
        put16(&mut b, 0x78, (self.uid >> 16) as u16);
        put16(&mut b, 0x7A, (self.gid >> 16) as u16);
        put16(&mut b, 0x80, 32);
        put32(&mut b, 0x84, self.ctime.extra());
        put32(&mut b, 0x88, self.mtime.extra());
        put32(&mut b, 0x8C, self.atime.extra());
        put32(&mut b, 0x90, self.crtime.lo());
        put32(&mut b, 0x94, self.crtime.extra());
        if !self.xattrs.is_empty() {
            encode_xattrs(&mut b[XATTR_AT..], &self.xattrs);
        }
        let crc = crc32c(ino_seed(csum_seed, ino, self.generation), &b);
        put16(&mut b, 0x7C, crc as u16);
        put16(&mut b, 0x82, (crc >> 16) as u16);
        b
    }
}

/// Bytes the in-inode attributes `x` take (they must fit 96).
pub fn xattr_bytes(x: &[Xattr]) -> usize {
    4 + 4
        + x.iter()
            .map(|a| 16 + a.name.len().next_multiple_of(4) + a.value.len().next_multiple_of(4))
            .sum::<usize>()
}

/// The in-inode attribute area: magic, entries (ending in four zero
/// bytes), values packed at the end.
fn encode_xattrs(area: &mut [u8], x: &[Xattr]) {
    if xattr_bytes(x) > area.len() {
        return;
    }
    put32(area, 0, 0xEA02_0000);
    let body = &mut area[4..];
    let mut at = 0usize;
    let mut end = body.len();
    for a in x {
        end -= a.value.len().next_multiple_of(4);
        body[end..end + a.value.len()].copy_from_slice(&a.value);
        body[at] = a.name.len() as u8;
        body[at + 1] = a.index;
        put16(body, at + 2, end as u16);
        put32(body, at + 4, 0);
        put32(body, at + 8, a.value.len() as u32);
        // The hash is optional in the inode (0: not computed).
        put32(body, at + 12, 0);
        body[at + 16..at + 16 + a.name.len()].copy_from_slice(&a.name);
        at += 16 + a.name.len().next_multiple_of(4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_merges_and_splits() {
        let m = mapping([(0, 2, 100), (2, 3, 102), (5, 1, 200)]);
        assert_eq!(m, vec![(0, 5, 100), (5, 1, 200)]);
        let m = mapping([(0, 40_000, 1000)]);
        assert_eq!(m, vec![(0, 32_768, 1000), (32_768, 7232, 33_768)]);
        assert_eq!(tree_blocks(4), 0);
        assert_eq!(tree_blocks(5), 1);
    }

    #[test]
    fn times_keep_nanoseconds() {
        let t = Time {
            secs: 1_600_000_000,
            nanos: 123_456_789,
        };
        assert_eq!(t.extra() >> 2, 123_456_789);
        assert_eq!(t.extra() & 3, 0);
    }
}
