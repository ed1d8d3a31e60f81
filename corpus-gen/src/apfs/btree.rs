//! B-tree nodes: records packed into 4 KiB nodes (table of contents, keys
//! from the front, values from the back, the free space between and no
//! free lists), index levels above the leaves, and the root's info
//! footer. The four trees differ in storage (the file-system tree is
//! virtual, mapped through the volume's object map; the others are
//! physical), in fixed or variable record sizes (the object map's are
//! fixed and 8-byte aligned) and in what the footer reports.

use super::{BLOCK, put16, put32, put64, seal, ty};
use std::ops::Range;

/// Node header bytes (object header and the node's own fields).
pub const HEADER: usize = 56;
/// Root footer (`btree_info_t`) bytes.
pub const FOOTER: usize = 40;
/// Room for records in a node, whatever its place: the footer and the
/// table's rounding are always kept free, so any node may be a root.
pub const ROOM: usize = BLOCK - HEADER - FOOTER - 8;

/// One record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rec {
    /// Key bytes.
    pub key: Vec<u8>,
    /// Value bytes.
    pub val: Vec<u8>,
}

/// Which tree a node belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tree {
    /// The volume's file-system tree (virtual nodes).
    Fs,
    /// The volume's extent-reference tree (physical).
    ExtRef,
    /// An object map's tree (physical, fixed 16-byte keys).
    Omap,
    /// The snapshot metadata tree (physical).
    Snap,
}

impl Tree {
    fn fixed(self) -> bool {
        self == Tree::Omap
    }

    fn entry(self) -> usize {
        if self.fixed() { 4 } else { 8 }
    }

    fn subtype(self) -> u32 {
        match self {
            Tree::Fs => ty::FSTREE,
            Tree::ExtRef => ty::BLOCKREFTREE,
            Tree::Omap => ty::OMAP,
            Tree::Snap => ty::SNAPMETATREE,
        }
    }

    fn storage(self) -> u32 {
        if self == Tree::Fs {
            ty::VIRTUAL
        } else {
            ty::PHYSICAL
        }
    }

    /// `bt_flags`: physical trees say so; all but the object map store
    /// records unaligned.
    fn info_flags(self) -> u32 {
        const PHYSICAL: u32 = 0x10;
        const KV_NONALIGNED: u32 = 0x40;
        match self {
            Tree::Fs => KV_NONALIGNED,
            Tree::ExtRef | Tree::Snap => PHYSICAL | KV_NONALIGNED,
            Tree::Omap => PHYSICAL,
        }
    }
}

/// Bytes of the table of contents of a node of `n` records: a
/// fixed-size tree preallocates the whole table (as many entries as
/// records of its size fit the node, the footer not counted), as apfsck
/// requires; the others take what they use, one entry at least.
fn toc_len(tree: Tree, leaf: bool, n: usize) -> usize {
    if tree.fixed() {
        let val = if leaf { 16 } else { 8 };
        (BLOCK - HEADER) / (16 + val + 4) * 4
    } else {
        (n.max(1) * tree.entry()).next_multiple_of(8)
    }
}

/// Bytes a record takes in a node (its table entry included where the
/// table grows with the records).
pub fn rec_bytes(tree: Tree, r: &Rec) -> usize {
    if tree.fixed() {
        r.key.len() + r.val.len()
    } else {
        tree.entry() + r.key.len() + r.val.len()
    }
}

/// Split `recs` into nodes (leaves, or index nodes when `leaf` is
/// false), greedily, each holding what fits beside a root's footer.
pub fn pack(tree: Tree, leaf: bool, recs: &[Rec]) -> Vec<Range<usize>> {
    let room = if tree.fixed() {
        BLOCK - HEADER - FOOTER - toc_len(tree, leaf, 0)
    } else {
        ROOM
    };
    let mut out = Vec::new();
    let mut start = 0;
    let mut used = 0;
    for (i, r) in recs.iter().enumerate() {
        let n = rec_bytes(tree, r);
        if used + n > room && i > start {
            out.push(start..i);
            start = i;
            used = 0;
        }
        used += n;
    }
    if start < recs.len() {
        out.push(start..recs.len());
    }
    out
}

/// What a root's footer reports of its whole tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Footer {
    /// Leaf records in the tree.
    pub keys: u64,
    /// Nodes in the tree.
    pub nodes: u64,
    /// Longest key.
    pub longest_key: u32,
    /// Longest value.
    pub longest_val: u32,
}

/// Encode one node: `oid` is its virtual id (file-system tree) or its
/// block number; `root` carries the footer of a root.
pub fn node(tree: Tree, level: u16, root: Option<&Footer>, recs: &[Rec], oid: u64) -> Vec<u8> {
    let mut b = vec![0u8; BLOCK];
    let n = recs.len();
    let toc = toc_len(tree, level == 0, n);
    let key_start = HEADER + toc;
    let val_end = BLOCK - if root.is_some() { FOOTER } else { 0 };
    let mut flags = 0u16;
    if root.is_some() {
        flags |= 1;
    }
    if level == 0 {
        flags |= 2;
    }
    if tree.fixed() {
        flags |= 4;
    }
    put16(&mut b, 32, flags);
    put16(&mut b, 34, level);
    put32(&mut b, 36, n as u32);
    put16(&mut b, 40, 0);
    put16(&mut b, 42, toc as u16);
    let mut k = 0usize;
    let mut v = 0usize;
    for (i, r) in recs.iter().enumerate() {
        let ko = key_start + k;
        b[ko..ko + r.key.len()].copy_from_slice(&r.key);
        v += r.val.len();
        let vo = val_end - v;
        b[vo..vo + r.val.len()].copy_from_slice(&r.val);
        let t = HEADER + i * tree.entry();
        if tree.fixed() {
            put16(&mut b, t, k as u16);
            put16(&mut b, t + 2, v as u16);
        } else {
            put16(&mut b, t, k as u16);
            put16(&mut b, t + 2, r.key.len() as u16);
            put16(&mut b, t + 4, v as u16);
            put16(&mut b, t + 6, r.val.len() as u16);
        }
        k += r.key.len();
    }
    // Free space: after the keys, before the values; no free lists.
    put16(&mut b, 44, k as u16);
    put16(&mut b, 46, (val_end - key_start - k - v) as u16);
    put16(&mut b, 48, 0xFFFF);
    put16(&mut b, 50, 0);
    put16(&mut b, 52, 0xFFFF);
    put16(&mut b, 54, 0);
    if let Some(f) = root {
        let at = BLOCK - FOOTER;
        put32(&mut b, at, tree.info_flags());
        put32(&mut b, at + 4, BLOCK as u32);
        if tree.fixed() {
            put32(&mut b, at + 8, 16);
            put32(&mut b, at + 12, 16);
            put32(&mut b, at + 16, 16);
            put32(&mut b, at + 20, 16);
        } else {
            put32(&mut b, at + 16, f.longest_key);
            put32(&mut b, at + 20, f.longest_val);
        }
        put64(&mut b, at + 24, f.keys);
        put64(&mut b, at + 32, f.nodes);
    }
    let kind = tree.storage()
        | if root.is_some() {
            ty::BTREE
        } else {
            ty::BTREE_NODE
        };
    seal(&mut b, oid, kind, tree.subtype());
    b
}

/// A node below an index level: its first key and its address (virtual
/// id or block).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Child {
    /// First key of the node.
    pub first_key: Vec<u8>,
    /// Its virtual id or block.
    pub ptr: u64,
}

/// One index node to write.
#[derive(Debug, Clone)]
pub struct IndexNode {
    /// Its virtual id or block.
    pub ptr: u64,
    /// Level (1 above the leaves).
    pub level: u16,
    /// Its records: each child's first key and address.
    pub recs: Vec<Rec>,
}

/// The index levels above `children` (level 1 and up), bottom up, the root
/// last; at least one level, so that leaves written elsewhere never need
/// the root's footer. `alloc` gives each new node its address.
pub fn index_levels(
    tree: Tree,
    mut children: Vec<Child>,
    alloc: &mut dyn FnMut() -> u64,
) -> Vec<IndexNode> {
    let mut out = Vec::new();
    let mut level = 1u16;
    loop {
        let recs: Vec<Rec> = children
            .iter()
            .map(|c| Rec {
                key: c.first_key.clone(),
                val: c.ptr.to_le_bytes().to_vec(),
            })
            .collect();
        let mut next = Vec::new();
        for r in pack(tree, false, &recs) {
            let ptr = alloc();
            next.push(Child {
                first_key: recs[r.start].key.clone(),
                ptr,
            });
            out.push(IndexNode {
                ptr,
                level,
                recs: recs[r].to_vec(),
            });
        }
        if next.len() <= 1 {
            return out;
        }
        children = next;
        level += 1;
    }
}
