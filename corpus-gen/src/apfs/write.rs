//! The APFS container as one sequential stream: a pass over every group's
//! plan numbers the objects, counts each group's leaf nodes and its blocks
//! in use; then the head (container objects, the internal pool with the
//! allocation bitmap, streamed by planning each group again, the object
//! map and index nodes), the skeleton's leaves and each group's leaves
//! are written in disk order.
//!
//! Memory: one object-map record and one index entry per leaf node, the
//! directory records of skeleton folders, and a few numbers per group.

use super::btree::{self, Child, Footer, IndexNode, Rec, Tree};
use super::container::{self, NxFacts, VolFacts};
use super::layout;
use super::records;
use super::*;
use crate::error::CorpusError;
use crate::plan::{GroupPlan, Out, Volume};

/// What the pass over the plan found, and the head's nodes.
#[derive(Debug)]
pub struct ApfsWriter {
    p: ApfsParams,
    /// First inode number of each group.
    id_base: Vec<u64>,
    /// First leaf-node virtual id of each group.
    leaf_oid: Vec<u64>,
    /// The skeleton's leaves (encoded).
    skel_leaves: Vec<Vec<u8>>,
    /// Nodes of the tree area, by block.
    tree_nodes: Vec<(u64, Vec<u8>)>,
    /// Leaf nodes at each group's start.
    group_leaves: Vec<u32>,
    /// End of the tree area's nodes.
    tree_end: u64,
    /// Free blocks.
    free: u64,
    vol: VolFacts,
    nx: NxFacts,
    /// Live files and folders (the skeleton's folders counted, not the
    /// root).
    pub files: u64,
    /// See [`ApfsWriter::files`].
    pub dirs: u64,
}

/// Which of a group's clusters are in use: its leaf nodes and its listed
/// files' blocks.
fn group_used(plan: &GroupPlan, leaves: u32) -> Vec<bool> {
    let mut used = vec![false; plan.n as usize];
    for u in used.iter_mut().take(leaves as usize) {
        *u = true;
    }
    for it in plan.items.iter().filter(|it| layout::live_item(it)) {
        for r in &it.runs {
            for c in r.start..r.start + r.len {
                if let Some(u) = used.get_mut(c as usize) {
                    *u = true;
                }
            }
        }
    }
    used
}

/// The allocation bitmap as it streams out, a chunk's block at a time.
struct Bits<'a> {
    words: Vec<u64>,
    n: u64,
    /// Free blocks of each chunk written.
    free: Vec<u32>,
    total: u64,
    out: &'a mut dyn Out,
}

impl Bits<'_> {
    fn push(&mut self, used: bool, count: u64) -> Result<(), CorpusError> {
        for _ in 0..count {
            if used {
                self.words[(self.n % BLOCKS_PER_CHUNK / 64) as usize] |= 1 << (self.n % 64);
            }
            self.n += 1;
            if self.n.is_multiple_of(BLOCKS_PER_CHUNK) || self.n == self.total {
                self.flush()?;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), CorpusError> {
        let blocks = (self.n - 1) % BLOCKS_PER_CHUNK + 1;
        let used: u64 = self.words.iter().map(|w| w.count_ones() as u64).sum();
        self.free.push((blocks - used) as u32);
        let mut b = vec![0u8; BLOCK];
        for (i, w) in self.words.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        self.words.iter_mut().for_each(|w| *w = 0);
        self.out.put(&b)
    }
}

impl ApfsWriter {
    /// Plan the container for `vol`: `uuids` are the container's and the
    /// volume's, `name` the volume's name, `formatted` its creation time
    /// (ns since 1970).
    pub fn new(
        vol: &Volume,
        uuids: ([u8; 16], [u8; 16]),
        name: &str,
        formatted: u64,
    ) -> Result<ApfsWriter, CorpusError> {
        let p = vol
            .geo
            .apfs
            .ok_or_else(|| CorpusError::Worker("APFS writer on a volume without APFS".into()))?;
        // Block zero, both checkpoint areas, the container object map, the
        // volume superblock, its object map and snapshot tree, the whole
        // internal pool and its bitmaps.
        let mut used = IP_BASE + p.ip_blocks;
        let mut group_leaves = Vec::with_capacity(vol.groups as usize);
        let mut id_base = Vec::with_capacity(vol.groups as usize);
        let mut leaf_oid = Vec::with_capacity(vol.groups as usize);
        let mut next_id = layout::first_group_id(vol);
        let mut next_oid = oid::FIRST_FS_NODE;
        let mut fs_children: Vec<Child> = Vec::new();
        let mut eref_children: Vec<Child> = Vec::new();
        let mut omap: Vec<Rec> = Vec::new();
        let mut head_drecs = Vec::new();
        let (mut files, mut dirs) = (0u64, (vol.skel.len() - 1) as u64);
        let mut data_blocks = 0u64;
        let (mut fs_leaves, mut eref_leaves) = (0u64, 0u64);
        let (mut fs_keys, mut eref_keys) = (0u64, 0u64);
        let mut longest = (0u32, 0u32);
        for k in 0..vol.groups {
            let plan = vol.plan_group(k);
            id_base.push(next_id);
            leaf_oid.push(next_oid);
            let g = layout::group_records(&p, &plan, next_id);
            next_id += layout::group_ids(&plan);
            let (fl, el) = layout::group_leaves(&g);
            if (fl.len() + el.len()) as u32 > plan.mft {
                return Err(CorpusError::Worker(format!(
                    "APFS group {k} needs {} leaf nodes and reserved {}",
                    fl.len() + el.len(),
                    plan.mft
                )));
            }
            for (j, r) in fl.iter().enumerate() {
                let block = p.block_of(plan.base + j as u32);
                fs_children.push(Child {
                    first_key: g.fs[r.start].key.clone(),
                    ptr: next_oid,
                });
                omap.push(records::omap(next_oid, block));
                next_oid += 1;
            }
            for (j, r) in el.iter().enumerate() {
                let block = p.block_of(plan.base + (fl.len() + j) as u32);
                eref_children.push(Child {
                    first_key: g.extref[r.start].key.clone(),
                    ptr: block,
                });
            }
            fs_leaves += fl.len() as u64;
            fs_keys += g.fs.len() as u64;
            eref_keys += g.extref.len() as u64;
            for r in &g.fs {
                longest.0 = longest.0.max(r.key.len() as u32);
                longest.1 = longest.1.max(r.val.len() as u32);
            }
            eref_leaves += el.len() as u64;
            let leaves = (fl.len() + el.len()) as u32;
            used += group_used(&plan, leaves).iter().filter(|u| **u).count() as u64;
            group_leaves.push(leaves);
            files += g.files;
            dirs += g.dirs;
            data_blocks += g.data_blocks;
            head_drecs.extend(g.head);
        }
        // The skeleton's leaves, at the start of the planner's clusters.
        let skel_recs = layout::skeleton_records(vol, &head_drecs, formatted);
        drop(head_drecs);
        let ranges = btree::pack(Tree::Fs, true, &skel_recs);
        let room = vol.skel[0].clusters as usize;
        if ranges.len() > room {
            return Err(CorpusError::Worker(format!(
                "the APFS skeleton needs {} leaf nodes and reserved {room}",
                ranges.len()
            )));
        }
        let mut skel_children = Vec::new();
        let mut skel_leaves = Vec::new();
        for (j, r) in ranges.iter().enumerate() {
            let block = p.block_of(vol.skel[0].first + j as u32);
            skel_children.push(Child {
                first_key: skel_recs[r.start].key.clone(),
                ptr: next_oid,
            });
            omap.push(records::omap(next_oid, block));
            skel_leaves.push(btree::node(
                Tree::Fs,
                0,
                None,
                &skel_recs[r.clone()],
                next_oid,
            ));
            next_oid += 1;
        }
        used += skel_leaves.len() as u64;
        skel_children.extend(fs_children);
        fs_keys += skel_recs.len() as u64;
        for r in &skel_recs {
            longest.0 = longest.0.max(r.key.len() as u32);
            longest.1 = longest.1.max(r.val.len() as u32);
        }

        // Index nodes and the object map, in the tree area.
        let mut next_block = p.tree_base;
        let mut tree_nodes: Vec<(u64, Vec<u8>)> = Vec::new();
        let fs_index = btree::index_levels(Tree::Fs, skel_children, &mut || {
            let o = next_oid;
            next_oid += 1;
            o
        });
        let mut fs_index_blocks = Vec::new();
        for n in &fs_index {
            omap.push(records::omap(n.ptr, next_block));
            fs_index_blocks.push(next_block);
            next_block += 1;
        }
        let eref_index = if eref_children.is_empty() {
            Vec::new()
        } else {
            btree::index_levels(Tree::ExtRef, eref_children, &mut || {
                let b = next_block;
                next_block += 1;
                b
            })
        };
        let eref_root = match eref_index.last() {
            Some(n) => n.ptr,
            None => {
                let b = next_block;
                next_block += 1;
                b
            }
        };
        // By object id as a number (the keys' bytes are little-endian).
        omap.sort_by_key(|r| records::key_oid(&r.key));
        let omap_leaves = btree::pack(Tree::Omap, true, &omap);
        let mut omap_children = Vec::new();
        let mut omap_leaf_blocks = Vec::new();
        for r in &omap_leaves {
            omap_children.push(Child {
                first_key: omap[r.start].key.clone(),
                ptr: next_block,
            });
            omap_leaf_blocks.push(next_block);
            next_block += 1;
        }
        let omap_index = if omap_leaves.len() > 1 {
            btree::index_levels(Tree::Omap, omap_children, &mut || {
                let b = next_block;
                next_block += 1;
                b
            })
        } else {
            Vec::new()
        };
        if next_block > p.tree_base + p.tree_blocks {
            return Err(CorpusError::Worker(format!(
                "the APFS tree area needs {} blocks and has {}",
                next_block - p.tree_base,
                p.tree_blocks
            )));
        }
        used += next_block - p.tree_base;

        // Encode the tree area's nodes.
        let fs_nodes = fs_leaves + skel_leaves.len() as u64 + fs_index.len() as u64;
        let fs_root = fs_index.last().map(|n| n.ptr).unwrap_or(0);
        encode_index(
            Tree::Fs,
            &fs_index,
            &fs_index_blocks,
            Footer {
                keys: fs_keys,
                nodes: fs_nodes,
                longest_key: longest.0,
                longest_val: longest.1,
            },
            &mut tree_nodes,
        );
        let eref_nodes = eref_leaves + eref_index.len() as u64;
        if eref_index.is_empty() {
            tree_nodes.push((eref_root, container::empty_root(Tree::ExtRef, eref_root)));
        } else {
            let blocks: Vec<u64> = eref_index.iter().map(|n| n.ptr).collect();
            encode_index(
                Tree::ExtRef,
                &eref_index,
                &blocks,
                Footer {
                    keys: eref_keys,
                    nodes: eref_nodes,
                    longest_key: 8,
                    longest_val: 20,
                },
                &mut tree_nodes,
            );
        }
        let omap_nodes = omap_leaves.len() as u64 + omap_index.len() as u64;
        let omap_footer = Footer {
            keys: omap.len() as u64,
            nodes: omap_nodes,
            longest_key: 16,
            longest_val: 16,
        };
        let single = omap_leaves.len() == 1;
        for (r, &b) in omap_leaves.iter().zip(&omap_leaf_blocks) {
            let root = single.then_some(&omap_footer);
            tree_nodes.push((b, btree::node(Tree::Omap, 0, root, &omap[r.clone()], b)));
        }
        let omap_root = if single {
            omap_leaf_blocks[0]
        } else {
            let blocks: Vec<u64> = omap_index.iter().map(|n| n.ptr).collect();
            encode_index(
                Tree::Omap,
                &omap_index,
                &blocks,
                omap_footer,
                &mut tree_nodes,
            );
            omap_index.last().map(|n| n.ptr).unwrap_or(0)
        };
        tree_nodes.push((
            VOL_OMAP_BLOCK,
            container::omap(VOL_OMAP_BLOCK, omap_root, false),
        ));
        tree_nodes.sort_by_key(|n| n.0);

        // The volume's blocks: its object map and nodes, its trees' nodes,
        // the snapshot tree's root and its files' data (not the superblock).
        let alloc_blocks = 1 + omap_nodes + fs_nodes + eref_nodes.max(1) + 1 + data_blocks;
        Ok(ApfsWriter {
            p,
            id_base,
            leaf_oid,
            skel_leaves,
            tree_nodes,
            free: p.blocks - used,
            vol: VolFacts {
                uuid: uuids.1,
                name: name.to_string(),
                root_tree: fs_root,
                extref_tree: eref_root,
                next_obj_id: next_id,
                files,
                dirs,
                alloc_blocks,
                formatted,
            },
            nx: NxFacts {
                uuid: uuids.0,
                next_oid,
            },
            group_leaves,
            tree_end: next_block,
            files,
            dirs,
        })
    }

    /// Free blocks in the container.
    pub fn free_blocks(&self) -> u64 {
        self.free
    }

    /// The layout.
    pub fn params(&self) -> &ApfsParams {
        &self.p
    }

    /// First inode number of group `k`.
    pub fn id_base(&self, k: u32) -> u64 {
        self.id_base.get(k as usize).copied().unwrap_or(0)
    }

    /// Write blocks 0 to the planner's cluster 2: the container objects,
    /// the internal pool and the tree area.
    pub fn write_head(&self, vol: &Volume, out: &mut dyn Out) -> Result<(), CorpusError> {
        let p = &self.p;
        let nx = container::nx_superblock(p, &self.nx);
        let z = |out: &mut dyn Out, n: u64| out.put_zeros(n * BLOCK as u64);
        out.put(&nx)?;
        out.put(&container::checkpoint_map())?;
        out.put(&nx)?;
        z(out, DESC_BLOCKS - 2)?;
        out.put(&container::reaper())?;
        out.put(&container::spaceman(p, self.free))?;
        out.put(&container::free_queue(oid::IP_FQ))?;
        out.put(&container::free_queue(oid::MAIN_FQ))?;
        z(out, DATA_BLOCKS - 4)?;
        let nx_omap_root = NX_OMAP_ROOT_BLOCK;
        out.put(&container::omap(NX_OMAP_BLOCK, nx_omap_root, true))?;
        out.put(&container::nx_omap_root())?;
        out.put(&container::volume(&self.vol))?;
        // The volume's object map header is among the tree nodes, by block.
        let vol_omap = self
            .tree_nodes
            .iter()
            .find(|n| n.0 == VOL_OMAP_BLOCK)
            .map(|n| n.1.clone())
            .unwrap_or_default();
        out.put(&vol_omap)?;
        out.put(&container::empty_root(Tree::Snap, SNAP_BLOCK))?;
        out.put(&container::ip_bitmap(p))?;
        z(out, IP_BM_BLOCKS - 1)?;
        // Chunk bitmaps, then chunk-info blocks, then the pool's rest.
        let mut bits = Bits {
            words: vec![0; (BLOCKS_PER_CHUNK / 64) as usize],
            n: 0,
            free: Vec::with_capacity(p.chunks as usize),
            total: p.blocks,
            out: &mut *out,
        };
        // The head (up to the tree area), the tree area's nodes, the
        // skeleton's leaves, each group's leaves and files, what is left.
        bits.push(true, p.tree_base)?;
        bits.push(true, self.tree_end - p.tree_base)?;
        bits.push(false, p.data_base - self.tree_end)?;
        let skel = &vol.skel[0];
        bits.push(false, (skel.first - 2) as u64)?;
        bits.push(true, self.skel_leaves.len() as u64)?;
        let mut next = skel.first as u64 + self.skel_leaves.len() as u64;
        for k in 0..vol.groups {
            let plan = vol.plan_group(k);
            bits.push(false, plan.base as u64 - next)?;
            let leaves = self.group_leaves.get(k as usize).copied().unwrap_or(0);
            for u in group_used(&plan, leaves) {
                bits.push(u, 1)?;
            }
            next = plan.base as u64 + plan.n as u64;
        }
        bits.push(false, p.blocks - bits.n)?;
        let free_in = std::mem::take(&mut bits.free);
        if free_in.len() as u64 != p.chunks
            || free_in.iter().map(|&f| f as u64).sum::<u64>() != self.free
        {
            return Err(CorpusError::Worker(
                "APFS allocation bitmap disagrees with the planned count".into(),
            ));
        }
        for i in 0..p.cibs {
            out.put(&container::cib(p, i, &|c| free_in[c as usize]))?;
        }
        z(out, p.ip_blocks - p.chunks - p.cibs)?;
        // The tree area.
        let mut at = p.tree_base;
        for (b, bytes) in self.tree_nodes.iter().filter(|n| n.0 >= p.tree_base) {
            z(out, b - at)?;
            out.put(bytes)?;
            at = b + 1;
        }
        z(out, p.tree_base + p.tree_blocks - at)?;
        Ok(())
    }

    /// The skeleton's clusters: its leaf nodes, then zeros.
    pub fn skeleton_bytes(&self, clusters: u32) -> Vec<u8> {
        let mut out = Vec::with_capacity(clusters as usize * BLOCK);
        for l in &self.skel_leaves {
            out.extend_from_slice(l);
        }
        out.resize(clusters as usize * BLOCK, 0);
        out
    }

    /// A group's reserved clusters: its file-system leaves, its
    /// extent-reference leaves, then zeros.
    pub fn group_bytes(&self, plan: &GroupPlan) -> Vec<u8> {
        let k = plan.k as usize;
        let g = layout::group_records(&self.p, plan, self.id_base[k]);
        let (fl, el) = layout::group_leaves(&g);
        let mut out = Vec::with_capacity(plan.mft as usize * BLOCK);
        for (j, r) in fl.iter().enumerate() {
            let oid = self.leaf_oid[k] + j as u64;
            out.extend_from_slice(&btree::node(Tree::Fs, 0, None, &g.fs[r.clone()], oid));
        }
        for (j, r) in el.iter().enumerate() {
            let block = self.p.block_of(plan.base + (fl.len() + j) as u32);
            out.extend_from_slice(&btree::node(
                Tree::ExtRef,
                0,
                None,
                &g.extref[r.clone()],
                block,
            ));
        }
        out.resize(plan.mft as usize * BLOCK, 0);
        out
    }
}

fn encode_index(
    tree: Tree,
    nodes: &[IndexNode],
    blocks: &[u64],
    footer: Footer,
    out: &mut Vec<(u64, Vec<u8>)>,
) {
    let last = nodes.len().saturating_sub(1);
    for (i, (n, &b)) in nodes.iter().zip(blocks).enumerate() {
        let root = (i == last).then_some(&footer);
        out.push((b, btree::node(tree, n.level, root, &n.recs, n.ptr)));
    }
}
