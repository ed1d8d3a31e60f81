//! APFS's layout planner: folders take no clusters (their entries are
//! records in the file-system tree), nothing is resident, a deleted
//! folder keeps nothing listed (APFS removes the records: its files are
//! carvable, not recoverable by name), and each group reserves clusters at
//! its start for its own leaf nodes: the records of its folders and files,
//! and the physical-extent records of its files' blocks. The bytes only
//! APFS has (records, in key order) are built here too.

use super::btree::{self, Rec, Tree};
use super::decmpfs;
use super::records::{self, DT_DIR, DT_REG, Meta, Sorted};
use super::{ApfsParams, BLOCK, ino, nanos};
use crate::content::Kind;
use crate::error::CorpusError;
use crate::names::{NameForm, Times};
use crate::plan::{
    Child, DirPlan, FsLayout, GroupPlan, ItemPlan, LEAF_CAP, Leaf, Packing, Parent, Volume,
};
use crate::rng::Rng;

/// Most groups (as on FAT and exFAT).
const MAX_GROUPS: u64 = 30_000;
/// Largest record a leaf may have to take after another (an inode with a
/// 255-byte name and a data stream), for the leaf-count bounds.
const MAX_REC: usize = 512;
/// The user and group a Mac gives its first user's files (`staff`).
pub const UID: u32 = 501;
/// See [`UID`].
pub const GID: u32 = 20;
/// The quarantine attribute's name.
pub const QUARANTINE: &str = "com.apple.quarantine";

/// The APFS layout planner.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApfsLayout;

fn name_of(form: &NameForm) -> String {
    crate::names::stored_name(form)
}

/// Whether an item has an inode (listed, not deleted).
pub fn live_item(it: &ItemPlan) -> bool {
    !it.deleted && !it.residue && it.parent.is_some()
}

/// Whether an item's file is quarantined (downloaded: Safari sets the
/// attribute, and macOS keeps it).
pub fn quarantined(it: &ItemPlan) -> bool {
    it.leaf == Leaf::Downloads
}

/// The quarantine attribute's value, as Safari writes it: flags, the
/// download time in hex seconds, the agent and an event UUID.
pub fn quarantine_value(it: &ItemPlan) -> Vec<u8> {
    let secs = nanos(&it.times.created) / 1_000_000_000;
    let k = it.spec.key;
    format!(
        "0083;{secs:08x};Safari;{:08X}-{:04X}-{:04X}-{:04X}-{:012X}",
        (k >> 32) as u32,
        (k >> 16) as u16,
        k as u16 | 0x4000,
        (k >> 48) as u16 | 0x8000,
        k.rotate_left(17) & 0xFFFF_FFFF_FFFF
    )
    .into_bytes()
}

/// Blocks of leaf nodes `bytes` of records need at most (greedy packing
/// leaves at most one largest record's room unused per node).
fn leaves_for(bytes: usize) -> u32 {
    if bytes == 0 {
        0
    } else {
        (bytes / (btree::ROOM - MAX_REC)) as u32 + 1
    }
}

fn inode_bytes(name: &str, stream: bool) -> usize {
    8 + 8 + 92 + 4 + 4 + (name.len() + 1).next_multiple_of(8) + if stream { 44 } else { 0 }
}

fn drec_bytes(name: &str) -> usize {
    8 + 8 + 4 + name.len() + 1 + 18
}

impl FsLayout for ApfsLayout {
    fn max_groups(&self) -> u64 {
        MAX_GROUPS
    }

    fn resident_max(&self) -> u64 {
        0
    }

    fn folders_at_group_start(&self) -> bool {
        false
    }

    /// The root holds the skeleton's leaf nodes: every skeleton folder's
    /// inode and directory record, the records of every batch's folder
    /// and up to [`LEAF_CAP`] of the skeleton's own files per folder; the
    /// other skeleton folders take no clusters.
    fn skeleton_dir_clusters(&self, vol: &Volume, i: usize) -> Result<Option<u32>, CorpusError> {
        if i != 0 {
            return Ok(None);
        }
        let mut bytes = 4 * (inode_bytes("private-dir", false) + drec_bytes("private-dir"));
        for (j, d) in vol.skel.iter().enumerate() {
            bytes += inode_bytes(&d.name, false) + drec_bytes(&d.name);
            for f in vol.group_folders_in(j) {
                bytes += drec_bytes(&name_of(&f.form));
            }
            if d.leaf.is_some() {
                // The skeleton's own files: names under 39 characters.
                bytes += LEAF_CAP * drec_bytes(&"x".repeat(39 * 4));
            }
        }
        Ok(Some(leaves_for(bytes).max(1)))
    }

    fn deleted_dir_keeps(&self, children: &[&NameForm], _cluster: u64) -> Vec<bool> {
        vec![false; children.len()]
    }

    fn dir_clusters(&self, _: &[DirPlan], _: &[ItemPlan], _: usize, _: u64) -> u32 {
        0
    }

    /// Leaf nodes for the group's records, bounded before placement (a
    /// file of two or more clusters may be cut into up to four extents).
    fn group_reserve(&self, dirs: &[DirPlan], items: &[ItemPlan]) -> u32 {
        let mut fs = 0usize;
        let mut eref = 0usize;
        for d in dirs.iter().filter(|d| !d.deleted) {
            let name = name_of(&d.form);
            fs += inode_bytes(&name, false);
            if matches!(d.parent, Parent::Dir(_)) {
                fs += drec_bytes(&name);
            }
        }
        for it in items.iter().filter(|it| live_item(it)) {
            let name = name_of(&it.form);
            let clusters = it.spec.size.div_ceil(BLOCK as u64);
            let runs = if clusters >= 2 {
                clusters.min(4) as usize
            } else {
                clusters as usize
            };
            let fork = fork_of(it).is_some();
            fs += inode_bytes(&name, clusters > 0 && !fork);
            if matches!(it.parent, Some(Parent::Dir(_))) {
                fs += drec_bytes(&name);
            }
            if clusters > 0 {
                fs += 20 + runs * 48;
                eref += runs * 36;
            }
            if fork {
                // The decmpfs header and the resource fork's stream.
                fs += 2 * (8 + 8 + 2 + decmpfs::RESOURCE_FORK.len() + 1 + 4) + 16 + 48;
            }
            if quarantined(it) {
                fs += 8 + 8 + 2 + QUARANTINE.len() + 1 + 4 + 80;
            }
        }
        leaves_for(fs) + leaves_for(eref)
    }

    /// A `compressed_share` of the live text, log, HTML and PDF files of two
    /// blocks or more are compressed as `ditto --hfsCompression` compresses
    /// them (decmpfs zlib in the resource fork), where that saves a block.
    fn pack(&self, vol: &Volume, k: u32, items: &mut [ItemPlan]) {
        let share = vol.profile.compressed_share;
        if share <= 0.0 {
            return;
        }
        let mut rng = Rng::derive(vol.seed, &[0x444D_5046, k as u64]);
        let block = BLOCK as u64;
        for it in items.iter_mut() {
            let eligible = matches!(
                it.spec.kind,
                Kind::Text | Kind::Log | Kind::Html | Kind::Pdf
            ) && live_item(it)
                && it.link.is_none()
                && it.dup_group.is_none()
                && it.spec.size >= 2 * block;
            if !eligible || !rng.chance(share) {
                continue;
            }
            let Some(bytes) = crate::content::generate_without_pool(&it.spec) else {
                continue;
            };
            let fork = decmpfs::fork(&bytes).len() as u64;
            if fork.div_ceil(block) < it.spec.size.div_ceil(block) {
                it.packing = Some(Packing::Decmpfs { fork });
            }
        }
    }

    fn storable_name(&self, name: &str) -> Option<String> {
        super::storable_name(name)
    }
}

/// Inode number of skeleton folder `i` (the root is APFS's root, 2).
pub fn skel_id(i: usize) -> u64 {
    if i == 0 {
        ino::ROOT
    } else {
        ino::FIRST_USER + i as u64 - 1
    }
}

/// First inode number after the skeleton's.
pub fn first_group_id(vol: &Volume) -> u64 {
    ino::FIRST_USER + vol.skel.len() as u64 - 1
}

/// Inode numbers a group's plan takes (one per folder and per file,
/// listed or not, so that numbers follow the plan), and after them one
/// per compressed file's resource fork.
pub fn group_ids(plan: &GroupPlan) -> u64 {
    (plan.dirs.len()
        + plan.items.len()
        + plan.items.iter().filter(|it| fork_of(it).is_some()).count()) as u64
}

/// The resource fork's length of a compressed file.
pub fn fork_of(it: &ItemPlan) -> Option<u64> {
    match it.packing {
        Some(Packing::Decmpfs { fork }) if live_item(it) => Some(fork),
        _ => None,
    }
}

/// Inode number of a group's child, from the group's first number `base`.
pub fn child_id(plan: &GroupPlan, base: u64, c: Child) -> u64 {
    match c {
        Child::Dir(d) => base + d as u64,
        Child::Item(i) => base + plan.dirs.len() as u64 + i as u64,
    }
}

fn meta(t: &Times, uid: u32, gid: u32, mode: u16) -> Meta {
    Meta {
        created: nanos(&t.created),
        modified: nanos(&t.modified),
        changed: nanos(&t.modified),
        accessed: nanos(&t.accessed),
        uid,
        gid,
        mode,
        bsd_flags: 0,
    }
}

/// A group's records: its leaves' (file-system tree, in key order), the
/// directory records its skeleton-parented entries add to the skeleton's
/// leaves, and the physical extents of its files (extent-reference tree,
/// in block order).
#[derive(Debug, Default)]
pub struct GroupRecs {
    /// File-system records of the group's objects.
    pub fs: Vec<Rec>,
    /// Directory records in skeleton folders (by skeleton index).
    pub head: Vec<(usize, Sorted)>,
    /// Physical extents.
    pub extref: Vec<Rec>,
    /// Listed files.
    pub files: u64,
    /// Listed folders.
    pub dirs: u64,
    /// Blocks of the listed files.
    pub data_blocks: u64,
}

/// Build group `plan`'s records; its objects are numbered from `base`.
pub fn group_records(p: &ApfsParams, plan: &GroupPlan, base: u64) -> GroupRecs {
    let mut g = GroupRecs::default();
    let mut fs: Vec<Sorted> = Vec::new();
    let mut eref: Vec<Sorted> = Vec::new();
    let live_child = |c: &Child| match *c {
        Child::Dir(d) => !plan.dirs[d].deleted,
        Child::Item(i) => live_item(&plan.items[i]),
    };
    let add_drec = |g: &mut GroupRecs, fs: &mut Vec<Sorted>, parent: Parent, r: Sorted| match parent
    {
        Parent::Skel(s) => g.head.push((s, r)),
        Parent::Dir(_) => fs.push(r),
    };
    let parent_id = |parent: Parent| match parent {
        Parent::Skel(s) => skel_id(s),
        Parent::Dir(d) => base + d as u64,
    };
    for (d, dir) in plan.dirs.iter().enumerate() {
        if dir.deleted {
            continue;
        }
        g.dirs += 1;
        let id = base + d as u64;
        let name = name_of(&dir.form);
        let kids = dir.children.iter().filter(|c| live_child(c)).count() as u32;
        fs.push(records::inode(
            id,
            parent_id(dir.parent),
            &name,
            &meta(&dir.times, UID, GID, 0o040755),
            0,
            kids,
            None,
        ));
        let r = records::drec(
            parent_id(dir.parent),
            &name,
            id,
            nanos(&dir.times.created),
            DT_DIR,
        );
        add_drec(&mut g, &mut fs, dir.parent, r);
    }
    let mut next_stream = base + (plan.dirs.len() + plan.items.len()) as u64;
    for (i, it) in plan.items.iter().enumerate() {
        let Some(parent) = it.parent else { continue };
        if !live_item(it) {
            continue;
        }
        g.files += 1;
        let id = base + plan.dirs.len() as u64 + i as u64;
        let name = name_of(&it.form);
        let blocks: u64 = it.runs.iter().map(|r| r.len as u64).sum();
        let fork = fork_of(it);
        // A compressed file has no data stream: its blocks are its
        // resource fork's, an attribute's stream.
        let stream =
            (it.spec.size > 0 && fork.is_none()).then_some((it.spec.size, blocks * BLOCK as u64));
        let mut m = meta(&it.times, UID, GID, 0o100644);
        let flags = if fork.is_some() {
            m.bsd_flags = decmpfs::UF_COMPRESSED;
            records::INODE_HAS_RSRC_FORK
        } else {
            records::INODE_NO_RSRC_FORK
        };
        fs.push(records::inode(
            id,
            parent_id(parent),
            &name,
            &m,
            flags,
            1,
            stream,
        ));
        let r = records::drec(
            parent_id(parent),
            &name,
            id,
            nanos(&it.times.created),
            DT_REG,
        );
        add_drec(&mut g, &mut fs, parent, r);
        let owner = match fork {
            Some(len) => {
                let sid = next_stream;
                next_stream += 1;
                fs.push(records::xattr(
                    id,
                    decmpfs::DECMPFS,
                    &decmpfs::header(it.spec.size),
                ));
                fs.push(records::xattr_stream(
                    id,
                    decmpfs::RESOURCE_FORK,
                    sid,
                    len,
                    blocks * BLOCK as u64,
                ));
                Some(sid)
            }
            None if stream.is_some() => {
                fs.push(records::dstream_id(id));
                Some(id)
            }
            None => None,
        };
        if let Some(owner) = owner {
            let mut logical = 0u64;
            for r in &it.runs {
                let block = p.block_of(plan.base + r.start);
                let len = r.len as u64 * BLOCK as u64;
                fs.push(records::file_extent(owner, logical, len, block));
                eref.push(records::phys_extent(block, r.len as u64, owner));
                logical += len;
            }
            g.data_blocks += blocks;
        }
        if quarantined(it) {
            fs.push(records::xattr(id, QUARANTINE, &quarantine_value(it)));
        }
    }
    fs.sort();
    eref.sort();
    g.fs = fs.into_iter().map(Sorted::into_rec).collect();
    g.extref = eref.into_iter().map(Sorted::into_rec).collect();
    g
}

/// A group's leaf nodes, packed: file-system leaves then extent-reference
/// leaves, as record ranges.
pub fn group_leaves(g: &GroupRecs) -> (Vec<std::ops::Range<usize>>, Vec<std::ops::Range<usize>>) {
    (
        btree::pack(Tree::Fs, true, &g.fs),
        btree::pack(Tree::ExtRef, true, &g.extref),
    )
}

/// The skeleton's own records: the root and private directory (as mkapfs
/// makes them), every skeleton folder's inode and directory record, and
/// `extra`, the directory records groups add to skeleton folders.
/// `formatted` dates the two special directories.
pub fn skeleton_records(vol: &Volume, extra: &[(usize, Sorted)], formatted: u64) -> Vec<Rec> {
    let mut recs: Vec<Sorted> = extra.iter().map(|(_, r)| r.clone()).collect();
    let mut kids = vec![0u32; vol.skel.len()];
    for (s, _) in extra {
        kids[*s] += 1;
    }
    for d in vol.skel.iter().skip(1) {
        kids[d.parent] += 1;
    }
    let special = Meta {
        created: formatted,
        modified: formatted,
        changed: formatted,
        accessed: formatted,
        uid: 0,
        gid: 0,
        mode: 0o040755,
        bsd_flags: 0,
    };
    recs.push(records::drec(
        ino::ROOT_PARENT,
        "private-dir",
        ino::PRIVATE,
        formatted,
        DT_DIR,
    ));
    recs.push(records::inode(
        ino::PRIVATE,
        ino::ROOT_PARENT,
        "private-dir",
        &special,
        0,
        0,
        None,
    ));
    for (i, d) in vol.skel.iter().enumerate() {
        let id = skel_id(i);
        // The root and /Users belong to root (group admin, 80); the rest
        // of the tree to the user.
        let (uid, gid) = if i == 0 || d.parent == 0 && d.name == "Users" {
            (0, 80)
        } else {
            (UID, GID)
        };
        let m = meta(&d.times, uid, gid, 0o040755);
        if i == 0 {
            recs.push(records::drec(
                ino::ROOT_PARENT,
                "root",
                id,
                formatted,
                DT_DIR,
            ));
            recs.push(records::inode(
                id,
                ino::ROOT_PARENT,
                "root",
                &m,
                0,
                kids[0],
                None,
            ));
        } else {
            let parent = skel_id(d.parent);
            recs.push(records::drec(
                parent,
                &d.name,
                id,
                nanos(&d.times.created),
                DT_DIR,
            ));
            recs.push(records::inode(id, parent, &d.name, &m, 0, kids[i], None));
        }
    }
    recs.sort();
    recs.into_iter().map(Sorted::into_rec).collect()
}
