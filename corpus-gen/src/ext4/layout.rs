//! ext4's layout planner and the bytes only ext4 has: directories sized
//! in entries of `8 + name` bytes (rounded to 4) in blocks with a 12-byte
//! checksum tail, hashed once they pass one block; inode numbers (the
//! skeleton's from 12, then each group's directories and entries in
//! plan order); extent trees of files with more than four extents, their
//! leaf blocks taken from the group's first free clusters; which blocks
//! are allocated.

use super::dir::{self, Ent, HashKey, ftype};
use super::inode::{self, Inode, Time, Xattr};
use super::{BLOCK, Ext4Params, LPF_INO, ROOT_INO, TO_1980};
use crate::error::CorpusError;
use crate::names::{NameForm, Stamp, Times};
use crate::plan::{Child, DirPlan, FsLayout, GroupPlan, ItemPlan, LEAF_CAP, Link, Parent, Volume};
use std::collections::{BTreeMap, HashMap};

/// Most groups (the planner's limit).
const MAX_GROUPS: u64 = 30_000;
/// The owner of the user's files and folders (the first user account).
pub const USER_ID: u32 = 1000;
/// The SELinux label every file and folder carries in its inode (as on a
/// Fedora or RHEL server).
pub const SELINUX: &[u8] = b"unconfined_u:object_r:user_home_t:s0\0";

/// The ext4 layout planner; the hash seed sizes hashed directories.
#[derive(Debug, Clone, Copy)]
pub struct Ext4Layout {
    /// The volume's directory hash seed.
    pub key: [u32; 4],
}

fn stored(form: &NameForm) -> String {
    crate::names::stored_name(form)
}

fn hash_key(key: [u32; 4]) -> HashKey {
    HashKey { seed: key }
}

/// Blocks a directory of (stored name, deleted) entries takes.
fn blocks_of(names: &[(String, bool)], key: [u32; 4]) -> u64 {
    let items: Vec<(usize, bool)> = names.iter().map(|(n, d)| (n.len().min(255), *d)).collect();
    let k = hash_key(key);
    dir::blocks_for(&items, || {
        names
            .iter()
            .map(|(n, _)| dir::half_md4(n.as_bytes(), &k).0)
            .collect()
    })
}

fn child_names(dirs: &[DirPlan], items: &[ItemPlan], d: usize) -> Vec<(String, bool)> {
    dirs[d]
        .children
        .iter()
        .map(|c| match *c {
            Child::Item(i) => (stored(&items[i].form), items[i].deleted),
            Child::Dir(x) => (stored(&dirs[x].form), dirs[x].deleted),
        })
        .collect()
}

impl FsLayout for Ext4Layout {
    fn max_groups(&self) -> u64 {
        MAX_GROUPS
    }

    fn resident_max(&self) -> u64 {
        0
    }

    fn folders_at_group_start(&self) -> bool {
        false
    }

    /// Hard links (a second entry for an inode, its link count raised)
    /// and symbolic links: fast (the target in the inode) and slow (the
    /// target in a block).
    fn links(&self) -> bool {
        true
    }

    fn inline_link_max(&self) -> u64 {
        super::FAST_LINK_MAX
    }

    fn skeleton_dir_clusters(&self, vol: &Volume, i: usize) -> Result<Option<u32>, CorpusError> {
        // An upper bound: the skeleton's own files are planned later
        // (names under 39 bytes: 48 bytes each); spare blocks stay empty
        // leaves.
        let d = &vol.skel[i];
        let mut bytes = 24u64;
        if i == 0 {
            bytes += dir::rec_len("lost+found".len()) as u64;
        }
        for &c in &d.children {
            bytes += dir::rec_len(vol.skel[c].name.len()) as u64;
        }
        if d.leaf.is_some() {
            bytes += LEAF_CAP as u64 * 48;
        }
        for f in vol.group_folders_in(i) {
            bytes += dir::rec_len(stored(&f.form).len()) as u64;
        }
        // Leaves filled to at least 3,800 of their 4,084 bytes, plus the
        // index root.
        let blocks = if bytes <= 4084 {
            1
        } else {
            bytes.div_ceil(3800) + 2
        };
        Ok(Some(blocks as u32))
    }

    /// A deleted folder keeps its one block: `.`, `..` and the children
    /// that fit, in order, left in `..`'s slack.
    fn deleted_dir_keeps(&self, children: &[&NameForm], _cluster: u64) -> Vec<bool> {
        let mut used = 24;
        children
            .iter()
            .map(|f| {
                let s = dir::rec_len(stored(f).len());
                let fits = used + s <= BLOCK as usize - 12;
                if fits {
                    used += s;
                }
                fits
            })
            .collect()
    }

    fn dir_clusters(&self, dirs: &[DirPlan], items: &[ItemPlan], d: usize, _cluster: u64) -> u32 {
        if dirs[d].deleted {
            return 1;
        }
        blocks_of(&child_names(dirs, items, d), self.key) as u32
    }

    fn group_reserve(&self, _dirs: &[DirPlan], _items: &[ItemPlan]) -> u32 {
        0
    }

    /// Sparse files (disk images, downloads in progress) as on NTFS, in
    /// 64 KiB units: a hole has no blocks and no extent, so a sparse
    /// file's data units are extents of their own (more than four make a
    /// tree of depth 1). ext4 compresses nothing.
    fn pack(&self, vol: &Volume, k: u32, items: &mut [ItemPlan]) {
        let share = vol.profile.sparse_share;
        if share > 0.0 {
            let mut rng = crate::rng::Rng::derive(vol.seed, &[0x4558_5434, k as u64]);
            crate::plan::choose_sparse(&mut rng, items, share, SPARSE_UNIT);
        }
    }
}

/// The unit a sparse file's holes come in (as NTFS's compression unit,
/// so the generator's hole arithmetic is shared).
const SPARSE_UNIT: u64 = 16 * BLOCK;

/// An item's mapping: its stored clusters in order onto the file's
/// logical blocks, a sparse file's holes skipped.
pub fn item_mapping(p: &Ext4Params, plan: &GroupPlan, it: &ItemPlan) -> Vec<(u64, u64, u64)> {
    let Some(crate::plan::Packing::Sparse(data)) = &it.packing else {
        return mapping(p, plan, &it.runs);
    };
    let blocks = it.spec.size.div_ceil(BLOCK);
    let per = SPARSE_UNIT / BLOCK;
    let logical: Vec<u64> = data
        .iter()
        .enumerate()
        .filter(|(_, d)| **d)
        .flat_map(|(u, _)| (u as u64 * per)..((u as u64 + 1) * per).min(blocks))
        .collect();
    let mut phys = it
        .runs
        .iter()
        .flat_map(|r| (0..r.len as u64).map(move |i| p.block(plan.base + r.start) + i));
    inode::mapping(
        logical
            .iter()
            .map(|&l| (l, 1, phys.next().unwrap_or(0)))
            .collect::<Vec<_>>(),
    )
}

/// The inode of skeleton folder `i`.
pub fn skel_ino(i: usize) -> u32 {
    if i == 0 { ROOT_INO } else { LPF_INO + i as u32 }
}

/// The first inode number after the skeleton's.
pub fn first_group_ino(vol: &Volume) -> u32 {
    LPF_INO + vol.skel.len() as u32
}

/// Inode numbers of one group's directories and entries.
#[derive(Debug, Clone)]
pub struct Numbering {
    /// The group's first inode.
    pub base: u32,
    /// Each directory's inode.
    pub dir: Vec<u32>,
    /// Each item's inode (`None`: residue or dropped, no entry).
    pub item: Vec<Option<u32>>,
    /// Inodes the group takes.
    pub count: u32,
}

impl Numbering {
    /// Number group `plan` from `base`: directories, then items with an
    /// entry, in plan order; a hard link takes its target's number.
    pub fn new(plan: &GroupPlan, base: u32) -> Numbering {
        let dir: Vec<u32> = (0..plan.dirs.len() as u32).map(|d| base + d).collect();
        let mut next = base + dir.len() as u32;
        let mut item: Vec<Option<u32>> = Vec::with_capacity(plan.items.len());
        for it in &plan.items {
            let n = match it.link {
                _ if !has_entry(it) => None,
                Some(Link::Hard(t)) => item.get(t).copied().flatten(),
                _ => {
                    next += 1;
                    Some(next - 1)
                }
            };
            item.push(n);
        }
        Numbering {
            base,
            dir,
            item,
            count: next - base,
        }
    }

    /// The inode of a child.
    pub fn child(&self, c: Child) -> Option<u32> {
        match c {
            Child::Item(i) => self.item.get(i).copied().flatten(),
            Child::Dir(d) => self.dir.get(d).copied(),
        }
    }
}

/// Whether an item has a directory entry (and so an inode).
pub fn has_entry(it: &ItemPlan) -> bool {
    !it.residue && it.parent.is_some()
}

/// What the volume-wide numbering needs to know: every group's first
/// inode and every batch folder's inode by (skeleton folder, name).
#[derive(Debug, Clone, Default)]
pub struct VolumeInodes {
    /// First inode of each group.
    pub bases: Vec<u32>,
    /// Batch folders' inodes.
    pub folders: HashMap<(usize, String), u32>,
    /// The first inode no group takes.
    pub end: u32,
}

impl VolumeInodes {
    /// Start numbering after the skeleton.
    pub fn new(vol: &Volume) -> Self {
        VolumeInodes {
            bases: Vec::with_capacity(vol.groups as usize),
            folders: HashMap::new(),
            end: first_group_ino(vol),
        }
    }

    /// Number the next group (call in group order).
    pub fn add(&mut self, plan: &GroupPlan) -> Numbering {
        let n = Numbering::new(plan, self.end);
        for (d, dir) in plan.dirs.iter().enumerate() {
            if dir.group_folder
                && let Parent::Skel(s) = dir.parent
            {
                self.folders.insert((s, stored(&dir.form)), n.dir[d]);
            }
        }
        self.bases.push(self.end);
        self.end += n.count;
        n
    }

    /// Group `k`'s numbering.
    pub fn numbering(&self, plan: &GroupPlan) -> Numbering {
        Numbering::new(plan, self.bases.get(plan.k as usize).copied().unwrap_or(0))
    }
}

/// A planner stamp as ext4 keeps it (UTC seconds since 1970 and
/// nanoseconds).
pub fn time(s: Stamp) -> Time {
    Time {
        secs: (s.secs + TO_1980) as i64,
        nanos: s.centis as u32 * 10_000_000,
    }
}

/// A live or deleted inode's common fields.
fn base_inode(mode: u16, times: &Times, uid: u32, deleted: bool) -> Inode {
    let mut i = Inode {
        mode,
        uid,
        gid: uid,
        atime: time(times.accessed),
        mtime: time(times.modified),
        ctime: time(times.modified.max(times.created)),
        crtime: time(times.created),
        generation: 0,
        xattrs: vec![Xattr {
            index: 6,
            name: b"selinux".to_vec(),
            value: SELINUX.to_vec(),
        }],
        ..Default::default()
    };
    if deleted {
        // What ext4's unlink and eviction leave: no links, size and
        // blocks zero, an empty extent tree, dtime (and ctime) the
        // deletion.
        let when = times.accessed.max(times.modified);
        i.dtime = time(when).secs as u32;
        i.ctime = time(when);
        i.links = 0;
        let mut ib = [0u8; 60];
        inode::extent_header(&mut ib[..12], 0, inode::INODE_EXTENTS as u16, 0);
        i = i.with_extents(ib);
    }
    i
}

/// A group's extent trees: the tree blocks of every live file or folder
/// with more than four extents, at the group's first free clusters.
#[derive(Debug, Clone, Default)]
pub struct Trees {
    /// Tree blocks (group-relative cluster) per owner.
    pub of: HashMap<Child, Vec<u32>>,
    /// Every tree block, in cluster order.
    pub blocks: BTreeMap<u32, Child>,
}

/// The mapping of runs (group-relative) to ext4 blocks.
pub fn mapping(
    p: &Ext4Params,
    plan: &GroupPlan,
    runs: &[crate::plan::Run],
) -> Vec<(u64, u64, u64)> {
    let mut logical = 0u64;
    inode::mapping(runs.iter().map(|r| {
        let m = (logical, r.len as u64, p.block(plan.base + r.start));
        logical += r.len as u64;
        m
    }))
}

/// Clusters of the group no extent covers (the writer zeros them).
fn gaps(plan: &GroupPlan) -> impl Iterator<Item = u32> + '_ {
    let mut cur = 0u32;
    let mut ext = plan.extents.iter().peekable();
    std::iter::from_fn(move || {
        loop {
            if cur >= plan.n {
                return None;
            }
            match ext.peek() {
                Some(e) if cur >= e.start + e.len => {
                    ext.next();
                }
                Some(e) if cur >= e.start => cur = e.start + e.len,
                _ => {
                    cur += 1;
                    return Some(cur - 1);
                }
            }
        }
    })
}

/// Assign tree blocks for the group's files and folders.
pub fn trees(p: &Ext4Params, plan: &GroupPlan) -> Result<Trees, CorpusError> {
    let mut need: Vec<(Child, usize)> = Vec::new();
    for (d, dir) in plan.dirs.iter().enumerate() {
        if !dir.deleted {
            let n = inode::tree_blocks(mapping(p, plan, &dir.runs).len());
            if n > 0 {
                need.push((Child::Dir(d), n));
            }
        }
    }
    for (i, it) in plan.items.iter().enumerate() {
        if live_file(it) {
            let n = inode::tree_blocks(item_mapping(p, plan, it).len());
            if n > 0 {
                need.push((Child::Item(i), n));
            }
        }
    }
    let mut t = Trees::default();
    if need.is_empty() {
        return Ok(t);
    }
    let mut free = gaps(plan);
    for (c, n) in need {
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let b = free.next().ok_or_else(|| {
                CorpusError::Worker(format!(
                    "group {} has no free block for an extent tree",
                    plan.k
                ))
            })?;
            t.blocks.insert(b, c);
            v.push(b);
        }
        t.of.insert(c, v);
    }
    Ok(t)
}

/// A live file with content on disk.
pub fn live_file(it: &ItemPlan) -> bool {
    has_entry(it) && !it.deleted && it.spec.size > 0
}

/// Which of the group's clusters are allocated: live folders' and files'
/// blocks and their tree blocks.
pub fn used_clusters(plan: &GroupPlan, trees: &Trees) -> Vec<bool> {
    let mut used = plan.used_by(live_file);
    for &b in trees.blocks.keys() {
        if let Some(u) = used.get_mut(b as usize) {
            *u = true;
        }
    }
    used
}

/// Extent-tree blocks to write, by ext4 block number.
type TreeBlocks = Vec<(u64, Vec<u8>)>;

/// Build an inode whose data `map` gives, with its tree blocks (cluster
/// numbers relative to the group) and the blocks to write.
fn mapped(
    p: &Ext4Params,
    plan: &GroupPlan,
    mut i: Inode,
    ino: u32,
    map: &[(u64, u64, u64)],
    tree_at: &[u32],
    seed: u32,
) -> Result<(Inode, TreeBlocks), CorpusError> {
    let at: Vec<u64> = tree_at.iter().map(|&c| p.block(plan.base + c)).collect();
    let t = inode::tree(map, &at, inode::ino_seed(seed, ino, i.generation))
        .ok_or_else(|| CorpusError::Worker(format!("inode {ino}: extent tree too large")))?;
    let data: u64 = map.iter().map(|m| m.1).sum();
    i.sectors = (data + t.blocks.len() as u64) * (BLOCK / 512);
    Ok((i.with_extents(t.iblock), t.blocks))
}

/// Every inode of a group, by number, and the extent tree blocks (by
/// group-relative cluster) to write.
pub struct GroupInodes {
    /// (inode number, inode, is a live directory, allocated).
    pub inodes: Vec<(u32, Inode, bool, bool)>,
    /// Tree blocks by cluster.
    pub tree_blocks: BTreeMap<u32, Vec<u8>>,
}

/// Build the inodes of group `plan`.
pub fn group_inodes(
    p: &Ext4Params,
    plan: &GroupPlan,
    num: &Numbering,
    trees: &Trees,
) -> Result<GroupInodes, CorpusError> {
    let seed = p.ids.csum_seed();
    let key = p.ids.hash_seed;
    let mut out = Vec::with_capacity(num.count as usize);
    let mut tree_blocks = BTreeMap::new();
    let tree_of = |c: Child| trees.of.get(&c).cloned().unwrap_or_default();
    for (d, dir) in plan.dirs.iter().enumerate() {
        let ino = num.dir[d];
        let mut i = base_inode(0o040755, &dir.times, USER_ID, dir.deleted);
        if !dir.deleted {
            let subdirs = dir
                .children
                .iter()
                .filter(|c| matches!(c, Child::Dir(x) if !plan.dirs[*x].deleted))
                .count();
            i.links = 2 + subdirs as u16;
            let blocks: u64 = dir.runs.iter().map(|r| r.len as u64).sum();
            i.size = blocks * BLOCK;
            let names = child_names(&plan.dirs, &plan.items, d);
            if blocks > 1 && dir_is_indexed(&names, blocks, key) {
                i.flags |= super::FLAG_INDEX;
            }
            let map = mapping(p, plan, &dir.runs);
            let (i2, tb) = mapped(p, plan, i, ino, &map, &tree_of(Child::Dir(d)), seed)?;
            i = i2;
            put_tree_blocks(p, plan, tb, &mut tree_blocks);
        }
        out.push((ino, i, !dir.deleted, !dir.deleted));
    }
    // Each live file's names: one, and one more per hard link to it.
    let mut names = vec![1u16; plan.items.len()];
    for it in &plan.items {
        if let (Some(Link::Hard(t)), true) = (it.link, has_entry(it))
            && let Some(n) = names.get_mut(t)
        {
            *n += 1;
        }
    }
    for (n, it) in plan.items.iter().enumerate() {
        let Some(ino) = num.item[n] else { continue };
        match it.link {
            // The target's inode, written with it.
            Some(Link::Hard(_)) => continue,
            Some(Link::Symbolic(_) | Link::SymbolicAbsolute(_)) => {
                let target = it.link_text.clone().unwrap_or_default();
                let mut i = base_inode(0o120777, &it.times, USER_ID, false);
                i.links = 1;
                i.size = target.len() as u64;
                if it.spec.size > 0 {
                    // A slow symlink: the target in its block, mapped by
                    // extents like a file's.
                    let map = item_mapping(p, plan, it);
                    let (i2, tb) = mapped(p, plan, i, ino, &map, &tree_of(Child::Item(n)), seed)?;
                    i = i2;
                    put_tree_blocks(p, plan, tb, &mut tree_blocks);
                } else if target.is_empty() || target.len() as u64 > super::FAST_LINK_MAX {
                    return Err(CorpusError::Worker(format!(
                        "symbolic link {ino}: a target of {} bytes is not a fast symlink's",
                        target.len()
                    )));
                } else {
                    // A fast symlink: the target in `i_block`, no
                    // extents, no blocks.
                    i.iblock[..target.len()].copy_from_slice(target.as_bytes());
                }
                out.push((ino, i, false, true));
                continue;
            }
            None => {}
        }
        let mut i = base_inode(0o100644, &it.times, USER_ID, it.deleted);
        if !it.deleted {
            i.links = names[n];
            i.size = it.spec.size;
            let map = if it.spec.size > 0 {
                item_mapping(p, plan, it)
            } else {
                Vec::new()
            };
            let (i2, tb) = mapped(p, plan, i, ino, &map, &tree_of(Child::Item(n)), seed)?;
            i = i2;
            put_tree_blocks(p, plan, tb, &mut tree_blocks);
        }
        out.push((ino, i, false, !it.deleted));
    }
    Ok(GroupInodes {
        inodes: out,
        tree_blocks,
    })
}

fn put_tree_blocks(
    p: &Ext4Params,
    plan: &GroupPlan,
    tb: TreeBlocks,
    into: &mut BTreeMap<u32, Vec<u8>>,
) {
    for (blk, bytes) in tb {
        let rel = (blk - p.block(plan.base)) as u32;
        into.insert(rel, bytes);
    }
}

/// Whether a directory of these names written in `blocks` blocks is
/// hashed (what [`dir::encode`] decides).
fn dir_is_indexed(names: &[(String, bool)], blocks: u64, key: [u32; 4]) -> bool {
    let ents: Vec<Ent> = names
        .iter()
        .map(|(n, d)| Ent {
            ino: 1,
            name: n.as_bytes().to_vec(),
            ftype: ftype::FILE,
            deleted: *d,
        })
        .collect();
    dir::encode(1, 1, &ents, blocks, 0, &hash_key(key)).1
}

/// The inode of the parent of a group directory.
fn parent_ino(num: &Numbering, parent: Parent) -> u32 {
    match parent {
        Parent::Skel(s) => skel_ino(s),
        Parent::Dir(d) => num.dir[d],
    }
}

/// The entry of child `c` of a group's plan.
fn child_ent(plan: &GroupPlan, num: &Numbering, c: Child) -> Option<Ent> {
    let ino = num.child(c)?;
    Some(match c {
        Child::Item(i) => Ent {
            ino,
            name: stored(&plan.items[i].form).into_bytes(),
            ftype: match plan.items[i].link {
                Some(Link::Symbolic(_) | Link::SymbolicAbsolute(_)) => ftype::SYMLINK,
                _ => ftype::FILE,
            },
            deleted: plan.items[i].deleted,
        },
        Child::Dir(d) => Ent {
            ino,
            name: stored(&plan.dirs[d].form).into_bytes(),
            ftype: ftype::DIR,
            deleted: plan.dirs[d].deleted,
        },
    })
}

/// Bytes of group directory `d` (whole; sized to its clusters).
pub fn dir_bytes(p: &Ext4Params, plan: &GroupPlan, num: &Numbering, d: usize) -> Vec<u8> {
    let dir = &plan.dirs[d];
    let me = num.dir[d];
    let ents: Vec<Ent> = dir
        .children
        .iter()
        .filter_map(|&c| child_ent(plan, num, c))
        .collect();
    let blocks: u64 = dir.runs.iter().map(|r| r.len as u64).sum();
    let seed = inode::ino_seed(p.ids.csum_seed(), me, 0);
    dir::encode(
        me,
        parent_ino(num, dir.parent),
        &ents,
        blocks.max(1),
        seed,
        &hash_key(p.ids.hash_seed),
    )
    .0
}

/// Skeleton folder `i`'s entries: its skeleton children, lost+found in
/// the root, group 0's entries there and every batch folder.
fn skeleton_ents(
    vol: &Volume,
    i: usize,
    g0: &GroupPlan,
    n0: &Numbering,
    vi: &VolumeInodes,
) -> Vec<Ent> {
    let d = &vol.skel[i];
    let mut ents = Vec::new();
    if i == 0 {
        ents.push(Ent {
            ino: LPF_INO,
            name: b"lost+found".to_vec(),
            ftype: ftype::DIR,
            deleted: false,
        });
    }
    for &c in &d.children {
        ents.push(Ent {
            ino: skel_ino(c),
            name: vol.skel[c].name.as_bytes().to_vec(),
            ftype: ftype::DIR,
            deleted: false,
        });
    }
    for (parent, child) in &g0.skel_children {
        if *parent == i
            && let Some(e) = child_ent(g0, n0, *child)
        {
            ents.push(e);
        }
    }
    for f in vol.group_folders_in(i) {
        let name = stored(&f.form);
        if let Some(&ino) = vi.folders.get(&(i, name.clone())) {
            ents.push(Ent {
                ino,
                name: name.into_bytes(),
                ftype: ftype::DIR,
                deleted: false,
            });
        }
    }
    ents
}

/// Bytes of skeleton folder `i` (sized to its clusters).
pub fn skeleton_dir_bytes(
    p: &Ext4Params,
    vol: &Volume,
    i: usize,
    g0: &GroupPlan,
    vi: &VolumeInodes,
) -> (Vec<u8>, bool) {
    let n0 = vi.numbering(g0);
    let ents = skeleton_ents(vol, i, g0, &n0, vi);
    let me = skel_ino(i);
    let seed = inode::ino_seed(p.ids.csum_seed(), me, 0);
    dir::encode(
        me,
        skel_ino(vol.skel[i].parent),
        &ents,
        vol.skel[i].clusters.max(1) as u64,
        seed,
        &hash_key(p.ids.hash_seed),
    )
}

/// Live subfolders of skeleton folder `i` (for its link count).
pub fn skeleton_subdirs(vol: &Volume, i: usize, g0: &GroupPlan, vi: &VolumeInodes) -> u32 {
    let n0 = vi.numbering(g0);
    skeleton_ents(vol, i, g0, &n0, vi)
        .iter()
        .filter(|e| e.ftype == ftype::DIR && !e.deleted)
        .count() as u32
}

/// Skeleton folder `i`'s inode.
pub fn skeleton_inode(
    p: &Ext4Params,
    vol: &Volume,
    i: usize,
    g0: &GroupPlan,
    vi: &VolumeInodes,
) -> Inode {
    let d = &vol.skel[i];
    let uid = if i == 0 { 0 } else { USER_ID };
    let mut n = base_inode(0o040755, &d.times, uid, false);
    n.links = 2 + skeleton_subdirs(vol, i, g0, vi) as u16;
    n.size = d.clusters as u64 * BLOCK;
    n.sectors = d.clusters as u64 * (BLOCK / 512);
    let indexed = skeleton_dir_bytes(p, vol, i, g0, vi).1;
    if indexed {
        n.flags |= super::FLAG_INDEX;
    }
    let mut ib = [0u8; 60];
    inode::extent_header(&mut ib[..12], 1, inode::INODE_EXTENTS as u16, 0);
    inode::extent_leaf(&mut ib[12..24], 0, d.clusters, p.block(d.first));
    n.with_extents(ib)
}
