//! The ext4 volume's head as one sequential stream: superblock, group
//! descriptors, reserved GDT blocks, block and inode bitmaps, inode
//! tables, the resize inode's block, lost+found, the journal, then the
//! skeleton's folders (the groups' clusters follow, written like the
//! other file systems', with each group's extent-tree blocks in its
//! first free clusters).
//!
//! A first pass over the groups (planning is cheap and repeatable)
//! numbers their inodes and marks their blocks; the head is then written
//! in disk order, each group re-planned for its inodes.

use super::head::{
    GroupCounts, Totals, group_desc, journal_iblock, journal_superblock, resize_dind_block,
    superblock,
};
use super::inode::{Inode, Time};
use super::layout::{
    Numbering, Trees, VolumeInodes, group_inodes, skel_ino, skeleton_dir_bytes, skeleton_inode,
    trees, used_clusters,
};
use super::{
    BLOCK, BLOCKS_PER_GROUP, Ext4Params, INODE_SIZE, JOURNAL_INO, LPF_BLOCKS, LPF_INO, RESIZE_INO,
    ROOT_INO, crc32c, dir, inode, set_bit,
};
use crate::error::CorpusError;
use crate::plan::{GroupPlan, Out, Volume};

/// What the first pass learns.
pub struct Prep {
    /// Inode numbering.
    pub inodes: VolumeInodes,
    /// The block bitmap of the whole volume.
    block_map: Vec<u8>,
    /// The inode bitmap of the whole volume.
    inode_map: Vec<u8>,
    /// Live directories per group.
    dirs: Vec<u32>,
    /// Highest inode index (1-based) written in each group.
    top: Vec<u32>,
    /// Free blocks in the volume.
    pub free_blocks: u64,
    /// Inodes the plan wanted beyond the volume's count.
    pub over: u64,
}

impl Prep {
    fn mark_inode(&mut self, p: &Ext4Params, ino: u32, allocated: bool, dir: bool) {
        let idx = ino as u64 - 1;
        if idx >= p.inodes() {
            return;
        }
        let g = (idx / p.inodes_per_group as u64) as usize;
        if allocated {
            set_bit(&mut self.inode_map, idx);
            if dir {
                self.dirs[g] += 1;
            }
        }
        let within = (idx % p.inodes_per_group as u64) as u32 + 1;
        self.top[g] = self.top[g].max(within);
    }
}

/// The first pass: number every group's inodes and mark every used block
/// and inode. Fails when the plan needs more inodes than the volume has
/// (ext4's inode count is fixed at mkfs time).
pub fn prepare(vol: &Volume, p: &Ext4Params) -> Result<Prep, CorpusError> {
    let mut prep = Prep {
        inodes: VolumeInodes::new(vol),
        block_map: vec![0u8; (p.groups as u64 * BLOCKS_PER_GROUP / 8) as usize],
        inode_map: vec![0u8; (p.inodes() / 8) as usize],
        dirs: vec![0; p.groups as usize],
        top: vec![0; p.groups as usize],
        free_blocks: 0,
        over: 0,
    };
    for b in 0..p.head_blocks() {
        set_bit(&mut prep.block_map, b);
    }
    // Padding past the last block counts as used.
    for b in p.blocks..p.groups as u64 * BLOCKS_PER_GROUP {
        set_bit(&mut prep.block_map, b);
    }
    for d in &vol.skel {
        for c in d.first..d.first + d.clusters {
            set_bit(&mut prep.block_map, p.block(c));
        }
    }
    for ino in 1..super::FIRST_INO {
        prep.mark_inode(p, ino, true, ino == ROOT_INO);
    }
    prep.mark_inode(p, LPF_INO, true, true);
    for i in 1..vol.skel.len() {
        prep.mark_inode(p, skel_ino(i), true, true);
    }
    for k in 0..vol.groups {
        let plan = vol.plan_group(k);
        let num = prep.inodes.add(&plan);
        let t = trees(p, &plan)?;
        for (c, u) in used_clusters(&plan, &t).into_iter().enumerate() {
            if u {
                set_bit(&mut prep.block_map, p.block(plan.base + c as u32));
            }
        }
        for (d, dir) in plan.dirs.iter().enumerate() {
            prep.mark_inode(p, num.dir[d], !dir.deleted, true);
        }
        for (i, it) in plan.items.iter().enumerate() {
            if let Some(ino) = num.item[i] {
                prep.mark_inode(p, ino, !it.deleted, false);
            }
        }
    }
    if prep.inodes.end as u64 - 1 > p.inodes() {
        prep.over = prep.inodes.end as u64 - 1 - p.inodes();
        return Err(CorpusError::Invalid(format!(
            "the plan needs {} inodes and this ext4 volume has {} (one per 16 KiB): {} files \
             would be dropped; use a larger disk or a lower --fill",
            prep.inodes.end - 1,
            p.inodes(),
            prep.over
        )));
    }
    let used: u64 = prep
        .block_map
        .iter()
        .map(|b| b.count_ones() as u64)
        .sum::<u64>()
        - (p.groups as u64 * BLOCKS_PER_GROUP - p.blocks);
    prep.free_blocks = p.blocks - used;
    Ok(prep)
}

/// Group `g`'s slice of a whole-volume bitmap.
fn slice(map: &[u8], g: u32, bits: u64) -> &[u8] {
    let n = (bits / 8) as usize;
    &map[g as usize * n..(g as usize + 1) * n]
}

/// Write the head and the skeleton's folders. `skel_order` lists the
/// skeleton folders by first cluster.
pub fn head(
    vol: &Volume,
    p: &Ext4Params,
    prep: &Prep,
    g0: &GroupPlan,
    skel_order: &[usize],
    out: &mut dyn Out,
) -> Result<(), CorpusError> {
    let ids = &p.ids;
    let seed = ids.csum_seed();
    let ipg = p.inodes_per_group as u64;
    // Group descriptors.
    let mut gdt = Vec::with_capacity(p.desc_blocks as usize * BLOCK as usize);
    let mut totals = Totals::default();
    for g in 0..p.groups {
        let bmap = slice(&prep.block_map, g, BLOCKS_PER_GROUP);
        let imap = slice(&prep.inode_map, g, ipg);
        let used_blocks: u64 = bmap.iter().map(|b| b.count_ones() as u64).sum::<u64>()
            - (BLOCKS_PER_GROUP - p.group_blocks(g));
        let used_inodes: u64 = imap.iter().map(|b| b.count_ones() as u64).sum();
        let c = GroupCounts {
            free_blocks: (p.group_blocks(g) - used_blocks) as u32,
            free_inodes: (ipg - used_inodes) as u32,
            dirs: prep.dirs[g as usize],
            itable_unused: p.inodes_per_group - prep.top[g as usize],
            block_bitmap_csum: crc32c(seed, bmap),
            inode_bitmap_csum: crc32c(seed, imap),
        };
        totals.free_blocks += c.free_blocks as u64;
        totals.free_inodes += c.free_inodes as u64;
        gdt.extend_from_slice(&group_desc(p, ids, g, &c));
    }
    gdt.resize(p.desc_blocks as usize * BLOCK as usize, 0);
    let mut b0 = vec![0u8; BLOCK as usize];
    b0[1024..2048].copy_from_slice(&superblock(p, ids, &totals));
    out.put(&b0)?;
    out.put(&gdt)?;
    out.put_zeros(p.reserved_gdt as u64 * BLOCK)?;
    // Bitmaps: a block bitmap is one block; an inode bitmap's bits past
    // the group's inodes are set, as mkfs pads them.
    for g in 0..p.groups {
        out.put(slice(&prep.block_map, g, BLOCKS_PER_GROUP))?;
    }
    for g in 0..p.groups {
        let mut b = slice(&prep.inode_map, g, ipg).to_vec();
        b.resize(BLOCK as usize, 0xFF);
        out.put(&b)?;
    }
    inode_tables(vol, p, prep, g0, out)?;
    out.put(&resize_dind_block(p))?;
    let lpf_seed = inode::ino_seed(seed, LPF_INO, 0);
    let key = dir::HashKey {
        seed: ids.hash_seed,
    };
    out.put(&dir::encode(LPF_INO, ROOT_INO, &[], LPF_BLOCKS, lpf_seed, &key).0)?;
    out.put(&journal_superblock(p, ids))?;
    out.put_zeros((p.journal_blocks as u64 - 1) * BLOCK)?;
    for &i in skel_order {
        out.put(&skeleton_dir_bytes(p, vol, i, g0, &prep.inodes).0)?;
    }
    Ok(())
}

/// Every inode table, inode by inode in number order.
fn inode_tables(
    vol: &Volume,
    p: &Ext4Params,
    prep: &Prep,
    g0: &GroupPlan,
    out: &mut dyn Out,
) -> Result<(), CorpusError> {
    let seed = p.ids.csum_seed();
    let mut t = Table {
        buf: Vec::with_capacity(1 << 20),
        next: 1,
        out,
    };
    let created = Time {
        secs: p.ids.created as i64,
        nanos: 0,
    };
    // The reserved inodes mkfs writes: the resize inode and the journal.
    let sys = |mode: u16| Inode {
        mode,
        links: 1,
        atime: created,
        ctime: created,
        mtime: created,
        crtime: created,
        ..Default::default()
    };
    t.put(
        ROOT_INO,
        &skeleton_inode(p, vol, 0, g0, &prep.inodes).encode(ROOT_INO, seed),
    )?;
    let mut resize = sys(0o100600);
    let apb = BLOCK / 4;
    resize.size = (apb * apb + apb + 12) * BLOCK;
    resize.sectors = (1 + p.reserved_gdt as u64) * (BLOCK / 512);
    resize.iblock[13 * 4..14 * 4].copy_from_slice(&(p.resize_dind() as u32).to_le_bytes());
    t.put(RESIZE_INO, &resize.encode(RESIZE_INO, seed))?;
    let journal = sys(0o100600).with_extents(journal_iblock(p));
    let journal = Inode {
        size: p.journal_blocks as u64 * BLOCK,
        sectors: p.journal_blocks as u64 * (BLOCK / 512),
        ..journal
    };
    t.put(JOURNAL_INO, &journal.encode(JOURNAL_INO, seed))?;
    let mut lpf = sys(0o040700);
    lpf.links = 2;
    lpf.size = LPF_BLOCKS * BLOCK;
    lpf.sectors = LPF_BLOCKS * (BLOCK / 512);
    let mut ib = [0u8; 60];
    inode::extent_header(&mut ib[..12], 1, inode::INODE_EXTENTS as u16, 0);
    inode::extent_leaf(&mut ib[12..24], 0, LPF_BLOCKS as u32, p.lpf_block());
    t.put(LPF_INO, &lpf.with_extents(ib).encode(LPF_INO, seed))?;
    for i in 1..vol.skel.len() {
        let n = skeleton_inode(p, vol, i, g0, &prep.inodes);
        t.put(skel_ino(i), &n.encode(skel_ino(i), seed))?;
    }
    for k in 0..vol.groups {
        let plan = if k == 0 {
            g0.clone()
        } else {
            vol.plan_group(k)
        };
        let num = prep.inodes.numbering(&plan);
        let tr = trees(p, &plan)?;
        let gi = group_inodes(p, &plan, &num, &tr)?;
        for (ino, n, _, _) in &gi.inodes {
            t.put(*ino, &n.encode(*ino, seed))?;
        }
    }
    let end = p.inodes() + 1;
    t.zeros_to(end)?;
    t.flush()
}

/// The inode tables as one stream.
struct Table<'a> {
    buf: Vec<u8>,
    next: u64,
    out: &'a mut dyn Out,
}

impl Table<'_> {
    fn zeros_to(&mut self, ino: u64) -> Result<(), CorpusError> {
        if ino > self.next {
            self.flush()?;
            self.out.put_zeros((ino - self.next) * INODE_SIZE as u64)?;
            self.next = ino;
        }
        Ok(())
    }

    fn put(&mut self, ino: u32, b: &[u8; INODE_SIZE]) -> Result<(), CorpusError> {
        let ino = ino as u64;
        if ino < self.next {
            return Err(CorpusError::Worker(format!(
                "inode {ino} written out of order"
            )));
        }
        if ino > self.next + 64 {
            self.zeros_to(ino)?;
        }
        while self.next < ino {
            self.buf.extend_from_slice(&[0u8; INODE_SIZE]);
            self.next += 1;
        }
        self.buf.extend_from_slice(b);
        self.next += 1;
        if self.buf.len() >= 1 << 20 {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), CorpusError> {
        self.out.put(&self.buf)?;
        self.buf.clear();
        Ok(())
    }
}

/// A group's facts the group writer and the manifest need.
pub struct GroupFacts {
    /// Inode numbers.
    pub num: Numbering,
    /// Extent trees.
    pub trees: Trees,
    /// Tree blocks' bytes by group-relative cluster.
    pub tree_blocks: std::collections::BTreeMap<u32, Vec<u8>>,
}

/// Facts of group `plan`.
pub fn group_facts(
    p: &Ext4Params,
    prep: &Prep,
    plan: &GroupPlan,
) -> Result<GroupFacts, CorpusError> {
    let num = prep.inodes.numbering(plan);
    let t = trees(p, plan)?;
    let gi = group_inodes(p, plan, &num, &t)?;
    Ok(GroupFacts {
        num,
        trees: t,
        tree_blocks: gi.tree_blocks,
    })
}
