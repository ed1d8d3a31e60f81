//! APFS on-disk structures as `mkapfs` (apfsprogs) makes them, with files:
//! one container (block zero's `nx_superblock`, a checkpoint descriptor
//! area holding the checkpoint map and the superblock's copy, a checkpoint
//! data area holding the reaper, the space manager and its two empty free
//! queues, the container object map, the internal pool with its chunk
//! bitmaps and chunk-info blocks) and one volume (its superblock, object
//! map, file-system tree, extent-reference tree and empty snapshot
//! metadata tree). Every object carries its Fletcher-64 checksum.
//!
//! Where the blocks lie (container block numbers, 4 KiB each):
//!
//! | blocks | what |
//! |---|---|
//! | 0 | container superblock |
//! | 1..65 | checkpoint descriptor area (map at 1, superblock copy at 2) |
//! | 65..1024 | checkpoint data area (reaper 65, space manager 66, free queues 67, 68) |
//! | 1024, 1025 | container object map and its one leaf |
//! | 1026, 1027, 1028 | volume superblock, volume object map, snapshot metadata tree |
//! | 1029..1045 | the internal pool's 16 bitmap blocks |
//! | 1045.. | the internal pool: one bitmap block per chunk, then the chunk-info blocks |
//! | then | the tree area: the volume object map's nodes, the index nodes of the file-system and extent-reference trees |
//! | then | the planner's clusters: the skeleton's leaf nodes first, then the groups, each opening with its own leaf nodes |
//!
//! The planner's cluster `c` is container block `data_base + c - 2`. A
//! group's file-system records (its folders' and files' inodes, the
//! directory records of its folders' children, file extents, data-stream
//! ids, extended attributes) and its physical-extent records sort
//! together, because object ids are handed out group by group and file
//! blocks lie in the group: so each group's leaf nodes sit at its start
//! and only the index nodes above them, and the object map, are written
//! at the head.

pub mod btree;
pub mod container;
pub mod decmpfs;
pub mod layout;
pub mod records;
pub mod write;

/// Bytes per block (mkapfs's default, the only size written here).
pub const BLOCK: usize = 4096;
/// Blocks per chunk (one bitmap block covers a chunk).
pub const BLOCKS_PER_CHUNK: u64 = 8 * BLOCK as u64;
/// Chunk-info entries per chunk-info block.
pub const CHUNKS_PER_CIB: u64 = (BLOCK as u64 - 40) / 32;
/// Chunk-info block addresses the space manager block holds (from offset
/// 0x180, one slot kept for the tier-2 device's offset).
pub const MAX_CIBS: u64 = (BLOCK as u64 - 0x180) / 8 - 1;
/// The transaction every object was written in (as mkapfs: 1).
pub const XID: u64 = 1;
/// Smallest container accepted here (the fixed objects end near block
/// 1,100, since physical objects' ids are their blocks and ids under 1024
/// are reserved; the planner needs room after them).
pub const MIN_CONTAINER: u64 = 4 << 20;
/// The volume's name (a Mac's startup data volume's).
pub const VOLUME_NAME: &str = "Macintosh HD";
/// Smallest disk accepted for APFS (the container is the disk less the
/// first MiB and the backup GPT). apfsck accepts what this writer makes
/// down to 6,272 KiB disks; below that the planner has no room for the
/// skeleton's folders; 8 MiB leaves every profile room.
pub const MIN_DISK: u64 = 8 << 20;
/// The GPT partition type of an APFS container
/// (7C3457EF-0000-11AA-AA11-00306543ECAC), as stored.
pub const GPT_TYPE: [u8; 16] = [
    0xEF, 0x57, 0x34, 0x7C, 0x00, 0x00, 0xAA, 0x11, 0xAA, 0x11, 0x00, 0x30, 0x65, 0x43, 0xEC, 0xAC,
];
/// The same in text.
pub const GPT_TYPE_TEXT: &str = "7C3457EF-0000-11AA-AA11-00306543ECAC";

/// Fixed block numbers.
pub const NX_BLOCK: u64 = 0;
/// Checkpoint descriptor area (mkapfs's 64 blocks).
pub const DESC_BASE: u64 = 1;
/// Its length in blocks.
pub const DESC_BLOCKS: u64 = 64;
/// Checkpoint data area.
pub const DATA_BASE: u64 = DESC_BASE + DESC_BLOCKS;
/// Its length in blocks: up to block 1024, because a physical object's id
/// is its block number and ids under 1024 are reserved (mkapfs's area is
/// larger still, 5904 blocks).
pub const DATA_BLOCKS: u64 = 1024 - DATA_BASE;
/// Checkpoint map block.
pub const CPM_BLOCK: u64 = DESC_BASE;
/// Superblock copy in the descriptor area.
pub const CP_SB_BLOCK: u64 = DESC_BASE + 1;
/// Reaper.
pub const REAPER_BLOCK: u64 = DATA_BASE;
/// Space manager.
pub const SPACEMAN_BLOCK: u64 = DATA_BASE + 1;
/// Internal pool free queue's root.
pub const IP_FQ_BLOCK: u64 = DATA_BASE + 2;
/// Main device free queue's root.
pub const MAIN_FQ_BLOCK: u64 = DATA_BASE + 3;
/// Container object map.
pub const NX_OMAP_BLOCK: u64 = DATA_BASE + DATA_BLOCKS;
/// Its one leaf.
pub const NX_OMAP_ROOT_BLOCK: u64 = NX_OMAP_BLOCK + 1;
/// Volume superblock.
pub const VOL_BLOCK: u64 = NX_OMAP_BLOCK + 2;
/// Volume object map.
pub const VOL_OMAP_BLOCK: u64 = VOL_BLOCK + 1;
/// Snapshot metadata tree (empty).
pub const SNAP_BLOCK: u64 = VOL_BLOCK + 2;
/// First internal-pool bitmap block.
pub const IP_BM_BASE: u64 = SNAP_BLOCK + 1;
/// Internal-pool bitmap blocks.
pub const IP_BM_BLOCKS: u64 = 16;
/// First internal-pool block.
pub const IP_BASE: u64 = IP_BM_BASE + IP_BM_BLOCKS;

/// Object ids (mkapfs's).
pub mod oid {
    /// Space manager (ephemeral).
    pub const SPACEMAN: u64 = 1024;
    /// Reaper (ephemeral).
    pub const REAPER: u64 = 1025;
    /// The volume superblock (virtual).
    pub const VOLUME: u64 = 1026;
    /// Internal pool free queue (ephemeral).
    pub const IP_FQ: u64 = 1028;
    /// Main free queue (ephemeral).
    pub const MAIN_FQ: u64 = 1029;
    /// First virtual id handed to the file-system tree's nodes.
    pub const FIRST_FS_NODE: u64 = 1030;
}

/// Object types and flags.
pub mod ty {
    /// Container superblock.
    pub const NX_SUPERBLOCK: u32 = 1;
    /// B-tree root.
    pub const BTREE: u32 = 2;
    /// B-tree non-root node.
    pub const BTREE_NODE: u32 = 3;
    /// Space manager.
    pub const SPACEMAN: u32 = 5;
    /// Chunk-info block.
    pub const SPACEMAN_CIB: u32 = 7;
    /// Free queue.
    pub const FREE_QUEUE: u32 = 9;
    /// Object map.
    pub const OMAP: u32 = 0x0b;
    /// Checkpoint map.
    pub const CHECKPOINT_MAP: u32 = 0x0c;
    /// Volume superblock.
    pub const FS: u32 = 0x0d;
    /// File-system tree.
    pub const FSTREE: u32 = 0x0e;
    /// Extent-reference tree.
    pub const BLOCKREFTREE: u32 = 0x0f;
    /// Snapshot metadata tree.
    pub const SNAPMETATREE: u32 = 0x10;
    /// Reaper.
    pub const NX_REAPER: u32 = 0x11;
    /// Virtual storage.
    pub const VIRTUAL: u32 = 0;
    /// Ephemeral storage.
    pub const EPHEMERAL: u32 = 0x8000_0000;
    /// Physical storage.
    pub const PHYSICAL: u32 = 0x4000_0000;
}

/// Inode numbers APFS reserves.
pub mod ino {
    /// The root's parent.
    pub const ROOT_PARENT: u64 = 1;
    /// The root directory.
    pub const ROOT: u64 = 2;
    /// The private directory.
    pub const PRIVATE: u64 = 3;
    /// First number for user files.
    pub const FIRST_USER: u64 = 16;
}

/// Little-endian stores into a block.
pub fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
/// See [`put16`].
pub fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
/// See [`put16`].
pub fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Fletcher-64 over 32-bit little-endian words, as APFS checksums
/// objects.
pub fn fletcher64(data: &[u8]) -> u64 {
    let (mut s1, mut s2) = (0u64, 0u64);
    for w in data.chunks_exact(4) {
        s1 += u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as u64;
        s2 += s1;
        // Reduce often enough that neither sum overflows (blocks are 4 KiB:
        // 1024 words; reducing each step keeps the arithmetic exact).
        s1 %= 0xFFFF_FFFF;
        s2 %= 0xFFFF_FFFF;
    }
    let c1 = 0xFFFF_FFFF - (s1 + s2) % 0xFFFF_FFFF;
    let c2 = 0xFFFF_FFFF - (s1 + c1) % 0xFFFF_FFFF;
    (c2 << 32) | c1
}

/// Set an object's header (`oid`, `xid`, type and subtype) and then its
/// checksum over the rest of the block.
pub fn seal(b: &mut [u8], oid: u64, kind: u32, subtype: u32) {
    put64(b, 8, oid);
    put64(b, 16, XID);
    put32(b, 24, kind);
    put32(b, 28, subtype);
    let sum = fletcher64(&b[8..]);
    put64(b, 0, sum);
}

/// Where a container of `blocks` blocks puts what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApfsParams {
    /// Blocks in the container.
    pub blocks: u64,
    /// Chunks (of [`BLOCKS_PER_CHUNK`] blocks).
    pub chunks: u64,
    /// Chunk-info blocks.
    pub cibs: u64,
    /// Internal-pool blocks (three per chunk and chunk-info block, as
    /// apfsck requires).
    pub ip_blocks: u64,
    /// First block of the tree area.
    pub tree_base: u64,
    /// Blocks of the tree area.
    pub tree_blocks: u64,
    /// The block of the planner's cluster 2.
    pub data_base: u64,
}

impl ApfsParams {
    /// The layout of a container of `bytes` bytes; `None` when it is
    /// too small or too large (more chunk-info blocks than the space
    /// manager's block addresses without address blocks).
    pub fn for_container(bytes: u64) -> Option<ApfsParams> {
        let blocks = bytes / BLOCK as u64;
        let chunks = blocks.div_ceil(BLOCKS_PER_CHUNK);
        let cibs = chunks.div_ceil(CHUNKS_PER_CIB);
        if cibs > MAX_CIBS || bytes < MIN_CONTAINER {
            return None;
        }
        let ip_blocks = (chunks + cibs) * 3;
        let tree_base = IP_BASE + ip_blocks;
        // The object map's leaves and the trees' index nodes: a leaf node
        // per few dozen files, an index entry per leaf, an object-map
        // entry per file-system node; a 512th of the container is many
        // times what even a disk of small files needs (checked when
        // written).
        let tree_blocks = 64 + blocks / 512;
        let data_base = tree_base + tree_blocks;
        // The planner's clusters: at least a few groups' worth of room.
        if data_base + 128 > blocks {
            return None;
        }
        Some(ApfsParams {
            blocks,
            chunks,
            cibs,
            ip_blocks,
            tree_base,
            tree_blocks,
            data_base,
        })
    }

    /// Block of chunk `c`'s bitmap.
    pub fn chunk_bitmap(&self, c: u64) -> u64 {
        IP_BASE + c
    }

    /// Block of chunk-info block `i`.
    pub fn cib(&self, i: u64) -> u64 {
        IP_BASE + self.chunks + i
    }

    /// Container block of planner cluster `c`.
    pub fn block_of(&self, c: u32) -> u64 {
        self.data_base + c as u64 - 2
    }
}

/// The name APFS stores for `name`, when it differs: a NUL becomes `_`
/// and a `/` becomes `:` (what macOS's POSIX layer shows for a name that
/// the Finder shows with `/`), and a name longer than 255 bytes of UTF-8
/// is cut at a character boundary (APFS keeps at most 255 bytes and the
/// NUL); `None` when nothing changes. Invalid UTF-8 cannot reach here: the
/// plan's names are Rust strings.
pub fn storable_name(name: &str) -> Option<String> {
    if !name.contains(['\0', '/']) && name.len() <= 255 {
        return None;
    }
    let mut out = String::with_capacity(name.len().min(255));
    for c in name.chars() {
        let c = match c {
            '\0' => '_',
            '/' => ':',
            c => c,
        };
        if out.len() + c.len_utf8() > 255 {
            break;
        }
        out.push(c);
    }
    Some(out)
}

/// The directory-record hash of a name on this volume (case-sensitive,
/// normalization-insensitive, so names are hashed without case folding):
/// CRC-32C, without its final inversion, of the name's NFD form as UTF-32
/// code points; its low 22 bits, shifted past the key's 10-bit name length.
pub fn name_hash(name: &str) -> u32 {
    use unicode_normalization::UnicodeNormalization;
    let mut bytes = Vec::with_capacity(name.len() * 4);
    for c in name.nfd() {
        bytes.extend_from_slice(&(c as u32).to_le_bytes());
    }
    let raw = !crc32c::crc32c(&bytes);
    (raw & 0x3F_FFFF) << 10
}

/// Nanoseconds since 1970 (UTC) of a plan time (taken as UTC, as the
/// exFAT writer does).
pub fn nanos(s: &crate::names::Stamp) -> u64 {
    const DOS_EPOCH_SECS: u64 = 3652 * 86_400;
    (s.secs + DOS_EPOCH_SECS) * 1_000_000_000 + s.centis as u64 * 10_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fletcher_of_a_sealed_block_is_zero_sum() {
        let mut b = vec![0u8; BLOCK];
        b[100] = 7;
        seal(&mut b, 5, ty::OMAP, 0);
        // Checking a block: the checksum over everything (with its own
        // checksum in front) verifies as apfsck does: recompute and compare.
        assert_eq!(
            u64::from_le_bytes(b[0..8].try_into().unwrap()),
            fletcher64(&b[8..])
        );
    }

    #[test]
    fn names_apfs_cannot_store_are_renamed() {
        assert_eq!(storable_name("a/b").as_deref(), Some("a:b"));
        assert_eq!(storable_name("a\0b").as_deref(), Some("a_b"));
        assert_eq!(storable_name("plain"), None);
        assert_eq!(storable_name(&"é".repeat(200)).map(|s| s.len()), Some(254));
    }

    #[test]
    fn layout_fits_small_and_refuses_tiny() {
        let p = ApfsParams::for_container(64 << 20).unwrap();
        assert_eq!(p.chunks, 1);
        assert_eq!(p.cibs, 1);
        assert_eq!(p.ip_blocks, 6);
        assert!(ApfsParams::for_container(1 << 20).is_none());
    }
}
