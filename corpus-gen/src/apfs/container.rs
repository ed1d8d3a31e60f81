//! The container's own objects, field by field as mkapfs sets them: the
//! superblock (block zero and its checkpoint copy), the checkpoint map,
//! the reaper, the space manager with its chunk-info blocks and internal
//! pool, the empty free queues, object maps and the volume superblock.

use super::btree::{self, Footer, Rec, Tree};
use super::*;

/// What the container superblock states beyond the layout.
#[derive(Debug, Clone, Copy)]
pub struct NxFacts {
    /// Container UUID.
    pub uuid: [u8; 16],
    /// Next virtual object id.
    pub next_oid: u64,
}

/// The container superblock (block zero; the checkpoint's copy is the same
/// bytes).
pub fn nx_superblock(p: &ApfsParams, f: &NxFacts) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    put32(&mut b, 0x20, 0x4253_584E);
    put32(&mut b, 0x24, BLOCK as u32);
    put64(&mut b, 0x28, p.blocks);
    // Incompatible features: version 2.
    put64(&mut b, 0x40, 2);
    b[0x48..0x58].copy_from_slice(&f.uuid);
    put64(&mut b, 0x58, f.next_oid);
    put64(&mut b, 0x60, XID + 1);
    put32(&mut b, 0x68, DESC_BLOCKS as u32);
    put32(&mut b, 0x6C, DATA_BLOCKS as u32);
    put64(&mut b, 0x70, DESC_BASE);
    put64(&mut b, 0x78, DATA_BASE);
    // One checkpoint: two descriptor blocks, four data blocks.
    put32(&mut b, 0x80, 2);
    put32(&mut b, 0x84, 4);
    put32(&mut b, 0x88, 0);
    put32(&mut b, 0x8C, 2);
    put32(&mut b, 0x90, 0);
    put32(&mut b, 0x94, 4);
    put64(&mut b, 0x98, oid::SPACEMAN);
    put64(&mut b, 0xA0, NX_OMAP_BLOCK);
    put64(&mut b, 0xA8, oid::REAPER);
    // One volume per 512 MiB, as the reference asks (at most 100).
    let max_vols = (p.blocks * BLOCK as u64).div_ceil(512 << 20).clamp(1, 100);
    put32(&mut b, 0xB4, max_vols as u32);
    put64(&mut b, 0xB8, oid::VOLUME);
    // Ephemeral info: minimum block count 8, 4 structures, version 1.
    put64(&mut b, 0x520, (8u64 << 32) | (4 << 16) | 1);
    seal(&mut b, 1, ty::EPHEMERAL | ty::NX_SUPERBLOCK, 0);
    b
}

/// The checkpoint map: the reaper, the space manager and the two free
/// queues, where they lie in the data area.
pub fn checkpoint_map() -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    put32(&mut b, 32, 1);
    put32(&mut b, 36, 4);
    let maps = [
        (ty::NX_REAPER, 0, oid::REAPER, REAPER_BLOCK),
        (ty::SPACEMAN, 0, oid::SPACEMAN, SPACEMAN_BLOCK),
        (ty::BTREE, ty::FREE_QUEUE, oid::IP_FQ, IP_FQ_BLOCK),
        (ty::BTREE, ty::FREE_QUEUE, oid::MAIN_FQ, MAIN_FQ_BLOCK),
    ];
    for (i, (t, sub, o, at)) in maps.iter().enumerate() {
        let m = 40 + i * 40;
        put32(&mut b, m, ty::EPHEMERAL | t);
        put32(&mut b, m + 4, *sub);
        put32(&mut b, m + 8, BLOCK as u32);
        put64(&mut b, m + 24, *o);
        put64(&mut b, m + 32, *at);
    }
    seal(&mut b, CPM_BLOCK, ty::PHYSICAL | ty::CHECKPOINT_MAP, 0);
    b
}

/// The empty reaper.
pub fn reaper() -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    put64(&mut b, 32, 1);
    // The "buffer has mapping" flag, always set.
    put32(&mut b, 64, 1);
    put32(&mut b, 108, (BLOCK - 112) as u32);
    seal(&mut b, oid::REAPER, ty::EPHEMERAL | ty::NX_REAPER, 0);
    b
}

/// An empty free queue's root.
pub fn free_queue(oid: u64) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    // Root, leaf, fixed sizes; the whole table preallocated as mkapfs does.
    put16(&mut b, 32, 1 | 2 | 4);
    let toc = ((BLOCK - btree::HEADER) / (16 + 8 + 4)) * 4;
    put16(&mut b, 42, toc as u16);
    put16(
        &mut b,
        46,
        (BLOCK - btree::HEADER - toc - btree::FOOTER) as u16,
    );
    put16(&mut b, 48, 0xFFFF);
    put16(&mut b, 52, 0xFFFF);
    let at = BLOCK - btree::FOOTER;
    // Ephemeral, ghosts allowed.
    put32(&mut b, at, 0x08 | 0x04);
    put32(&mut b, at + 4, BLOCK as u32);
    put32(&mut b, at + 8, 16);
    put32(&mut b, at + 12, 8);
    put32(&mut b, at + 16, 16);
    put32(&mut b, at + 20, 8);
    put64(&mut b, at + 32, 1);
    seal(&mut b, oid, ty::EPHEMERAL | ty::BTREE, ty::FREE_QUEUE);
    b
}

/// apfsprogs' free-queue node limits (functions of the size).
fn ip_fq_node_limit(chunks: u64) -> u16 {
    let r = (3 * (chunks + 751) / 1127 - 1) as u16;
    if r == 2 { 3 } else { r }
}

fn main_fq_node_limit(blocks: u64) -> u16 {
    let r = if blocks < 0x40000 {
        1 + (blocks - 1) / 4544
    } else if blocks < 0x10_0000 {
        116 + (blocks - 261_281) / 2272
    } else {
        512
    } as u16;
    if r == 2 { 3 } else { r }
}

/// The space manager: its device's chunk and block counts, the chunk-info
/// block addresses, the free queues and the internal pool's bookkeeping.
pub fn spaceman(p: &ApfsParams, free: u64) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    put32(&mut b, 0x20, BLOCK as u32);
    put32(&mut b, 0x24, BLOCKS_PER_CHUNK as u32);
    put32(&mut b, 0x28, CHUNKS_PER_CIB as u32);
    put32(&mut b, 0x2C, ((BLOCK - 40) / 8) as u32);
    // Main device.
    put64(&mut b, 0x30, p.blocks);
    put64(&mut b, 0x38, p.chunks);
    put32(&mut b, 0x40, p.cibs as u32);
    put64(&mut b, 0x48, free);
    put32(&mut b, 0x50, 0x180);
    // Tier-2 device: only the offset after the main device's addresses.
    put32(&mut b, 0x60 + 0x20, 0x180 + p.cibs as u32 * 8);
    put32(&mut b, 0x94, 16);
    put64(&mut b, 0x98, p.ip_blocks);
    put32(&mut b, 0xA0, 1);
    put32(&mut b, 0xA4, IP_BM_BLOCKS as u32);
    put64(&mut b, 0xA8, IP_BM_BASE);
    put64(&mut b, 0xB0, IP_BASE);
    // Free queues (empty).
    put64(&mut b, 0xC8 + 8, oid::IP_FQ);
    put16(&mut b, 0xC8 + 24, ip_fq_node_limit(p.chunks));
    put64(&mut b, 0xF0 + 8, oid::MAIN_FQ);
    put16(&mut b, 0xF0 + 24, main_fq_node_limit(p.blocks));
    // (The tier-2 free queue, the third, stays empty.) Internal pool
    // bitmaps: the first is current, the others free.
    put16(&mut b, 0x140, 1);
    put16(&mut b, 0x142, IP_BM_BLOCKS as u16 - 1);
    put32(&mut b, 0x144, 0x150);
    put32(&mut b, 0x148, 0x158);
    put32(&mut b, 0x14C, 0x160);
    put64(&mut b, 0x150, XID);
    put64(&mut b, 0x158, 0);
    for i in 0..IP_BM_BLOCKS as usize {
        let v = if i == 0 || i == IP_BM_BLOCKS as usize - 1 {
            0xFFFF
        } else {
            i as u16 + 1
        };
        put16(&mut b, 0x160 + 2 * i, v);
    }
    for i in 0..p.cibs {
        put64(&mut b, 0x180 + 8 * i as usize, p.cib(i));
    }
    seal(&mut b, oid::SPACEMAN, ty::EPHEMERAL | ty::SPACEMAN, 0);
    b
}

/// Chunk-info block `i`: each of its chunks' address, block count, free
/// count (from `free_in_chunk`) and bitmap block.
pub fn cib(p: &ApfsParams, i: u64, free_in_chunk: &dyn Fn(u64) -> u32) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    put32(&mut b, 32, i as u32);
    let first = i * CHUNKS_PER_CIB;
    let last = (first + CHUNKS_PER_CIB).min(p.chunks);
    put32(&mut b, 36, (last - first) as u32);
    for (j, c) in (first..last).enumerate() {
        let at = 40 + j * 32;
        let start = c * BLOCKS_PER_CHUNK;
        let count = (p.blocks - start).min(BLOCKS_PER_CHUNK);
        put64(&mut b, at, XID);
        put64(&mut b, at + 8, start);
        put32(&mut b, at + 16, count as u32);
        put32(&mut b, at + 20, free_in_chunk(c));
        put64(&mut b, at + 24, p.chunk_bitmap(c));
    }
    let at = p.cib(i);
    seal(&mut b, at, ty::PHYSICAL | ty::SPACEMAN_CIB, 0);
    b
}

/// The internal pool's current bitmap: its chunk bitmaps and chunk-info
/// blocks are in use.
pub fn ip_bitmap(p: &ApfsParams) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    for i in 0..p.chunks + p.cibs {
        b[(i / 8) as usize] |= 1 << (i % 8);
    }
    b
}

/// An object map header over the tree rooted at `root`; the container's
/// is manually managed.
pub fn omap(at: u64, root: u64, container: bool) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    put32(&mut b, 0x20, container as u32);
    put32(&mut b, 0x28, ty::PHYSICAL | ty::BTREE);
    put32(&mut b, 0x2C, ty::PHYSICAL | ty::BTREE);
    put64(&mut b, 0x30, root);
    seal(&mut b, at, ty::PHYSICAL | ty::OMAP, 0);
    b
}

/// The container object map's one leaf: the volume superblock.
pub fn nx_omap_root() -> Vec<u8> {
    let recs = [super::records::omap(oid::VOLUME, VOL_BLOCK)];
    btree::node(
        Tree::Omap,
        0,
        Some(&Footer {
            keys: 1,
            nodes: 1,
            longest_key: 16,
            longest_val: 16,
        }),
        &recs,
        NX_OMAP_ROOT_BLOCK,
    )
}

/// An empty physical tree's root at `at`.
pub fn empty_root(tree: Tree, at: u64) -> Vec<u8> {
    let recs: [Rec; 0] = [];
    btree::node(
        tree,
        0,
        Some(&Footer {
            keys: 0,
            nodes: 1,
            longest_key: 0,
            longest_val: 0,
        }),
        &recs,
        at,
    )
}

/// What the volume superblock states.
#[derive(Debug, Clone)]
pub struct VolFacts {
    /// Volume UUID.
    pub uuid: [u8; 16],
    /// Volume name.
    pub name: String,
    /// The file-system tree's root (virtual id).
    pub root_tree: u64,
    /// The extent-reference tree's root (block).
    pub extref_tree: u64,
    /// Next inode number.
    pub next_obj_id: u64,
    /// Regular files.
    pub files: u64,
    /// Directories (the root and private directory not counted).
    pub dirs: u64,
    /// Blocks the volume holds (its objects and its files' data).
    pub alloc_blocks: u64,
    /// When it was made (ns since 1970).
    pub formatted: u64,
}

/// The volume superblock (case-sensitive, normalization-insensitive:
/// hashed directory records).
pub fn volume(f: &VolFacts) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    put32(&mut b, 0x20, 0x4253_5041);
    // Features: hard-link map records, as mkapfs.
    put64(&mut b, 0x28, 2);
    // Incompatible: normalization-insensitive.
    put64(&mut b, 0x38, 8);
    put64(&mut b, 0x40, f.formatted);
    put64(&mut b, 0x58, f.alloc_blocks);
    // Meta crypto: version 5.0, class F, key revision 1.
    put16(&mut b, 0x60, 5);
    put32(&mut b, 0x68, 6);
    put16(&mut b, 0x70, 1);
    put32(&mut b, 0x74, ty::VIRTUAL | ty::BTREE);
    put32(&mut b, 0x78, ty::PHYSICAL | ty::BTREE);
    put32(&mut b, 0x7C, ty::PHYSICAL | ty::BTREE);
    put64(&mut b, 0x80, VOL_OMAP_BLOCK);
    put64(&mut b, 0x88, f.root_tree);
    put64(&mut b, 0x90, f.extref_tree);
    put64(&mut b, 0x98, SNAP_BLOCK);
    put64(&mut b, 0xB0, f.next_obj_id);
    put64(&mut b, 0xB8, f.files);
    put64(&mut b, 0xC0, f.dirs);
    put64(&mut b, 0xE0, f.alloc_blocks);
    b[0xF0..0x100].copy_from_slice(&f.uuid);
    put64(&mut b, 0x100, f.formatted);
    // Unencrypted.
    put64(&mut b, 0x108, 1);
    let id = b"caseload-corpus (mkapfs layout)";
    b[0x110..0x110 + id.len()].copy_from_slice(id);
    put64(&mut b, 0x130, f.formatted);
    put64(&mut b, 0x138, XID);
    let name = f.name.as_bytes();
    let n = name.len().min(255);
    b[0x2C0..0x2C0 + n].copy_from_slice(&name[..n]);
    put32(&mut b, 0x3C0, 3);
    seal(&mut b, oid::VOLUME, ty::VIRTUAL | ty::FS, 0);
    b
}
