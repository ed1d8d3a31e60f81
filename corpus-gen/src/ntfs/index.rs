//! Index B-trees (`$I30` directory indexes and the view indexes of
//! `$Secure` and `$Extend`): the `$INDEX_ROOT` value, the `INDX` blocks of
//! `$INDEX_ALLOCATION` and the `$BITMAP` of blocks in use.
//!
//! Entries arrive sorted by the index's collation. Small indexes live in
//! the root alone; larger ones are packed into 4 KiB blocks level by level,
//! each node filled to an even share of its level, one entry between
//! neighbouring nodes promoted to the level above (with a pointer to the
//! node on its left), until a level fits in the root. The planner calls
//! [`blocks_needed`] with entry lengths alone so it can reserve exactly the
//! clusters the writer will fill.

use super::INDEX_BLOCK;
use super::record::protect;
use std::cmp::Ordering;

/// `$INDEX_ROOT`/`INDX` header flag: the node has children.
const HAS_CHILDREN: u8 = 0x01;
/// Entry flag: a subnode VCN follows the entry.
const ENTRY_SUBNODE: u16 = 0x01;
/// Entry flag: the end marker.
const ENTRY_END: u16 = 0x02;
/// Where entries start in an `INDX` block.
const BLOCK_ENTRIES: usize = 0x40;
/// Offset of an `INDX` block's update sequence array.
const BLOCK_USA: usize = 0x28;
/// Bytes a node may give to entries, its end marker included.
const BLOCK_ROOM: usize = INDEX_BLOCK - BLOCK_ENTRIES;
/// Fixed bytes of an `$INDEX_ROOT` value before its entries.
pub const ROOT_FIXED: usize = 0x20;

/// Collation of `$I30` (file names, upper-cased through `$UpCase`).
pub const COLLATION_FILE_NAME: u32 = 0x01;
/// Collation of 32-bit little-endian keys (`$SII`, `$Q`).
pub const COLLATION_NTOFS_ULONG: u32 = 0x10;
/// Collation of SIDs (`$Quota:$O`).
pub const COLLATION_NTOFS_SID: u32 = 0x11;
/// Collation of security hashes (`$SDH`).
pub const COLLATION_NTOFS_SECURITY_HASH: u32 = 0x12;
/// Collation of sequences of 32-bit keys (`$ObjId:$O`, `$Reparse:$R`).
pub const COLLATION_NTOFS_ULONGS: u32 = 0x13;

/// One index entry without its subnode pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    bytes: Vec<u8>,
}

impl Entry {
    /// A directory entry: `file_ref` and the `$FILE_NAME` value as key.
    pub fn file_name(file_ref: u64, key: &[u8]) -> Entry {
        let len = (16 + key.len()).div_ceil(8) * 8;
        let mut b = vec![0u8; len];
        b[0..8].copy_from_slice(&file_ref.to_le_bytes());
        b[8..10].copy_from_slice(&(len as u16).to_le_bytes());
        b[10..12].copy_from_slice(&(key.len() as u16).to_le_bytes());
        b[16..16 + key.len()].copy_from_slice(key);
        Entry { bytes: b }
    }

    /// A view-index entry (`$SII`, `$SDH`): a key and the data it maps to.
    /// `pad` extra bytes follow the data (`$SDH` pads with `II`).
    pub fn view(key: &[u8], data: &[u8], pad: &[u8]) -> Entry {
        let data_at = (16 + key.len()).div_ceil(4) * 4;
        let len = (data_at + data.len() + pad.len()).div_ceil(8) * 8;
        let mut b = vec![0u8; len];
        b[0..2].copy_from_slice(&(data_at as u16).to_le_bytes());
        b[2..4].copy_from_slice(&(data.len() as u16).to_le_bytes());
        b[8..10].copy_from_slice(&(len as u16).to_le_bytes());
        b[10..12].copy_from_slice(&(key.len() as u16).to_le_bytes());
        b[16..16 + key.len()].copy_from_slice(key);
        b[data_at..data_at + data.len()].copy_from_slice(data);
        b[data_at + data.len()..data_at + data.len() + pad.len()].copy_from_slice(pad);
        Entry { bytes: b }
    }

    /// Length in bytes (without a subnode pointer).
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the entry is empty (never: the header alone is 16 bytes).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn write(&self, out: &mut Vec<u8>, child: Option<u64>) {
        let at = out.len();
        out.extend_from_slice(&self.bytes);
        if let Some(vcn) = child {
            let len = (self.bytes.len() + 8) as u16;
            out[at + 8..at + 10].copy_from_slice(&len.to_le_bytes());
            out[at + 12..at + 14].copy_from_slice(&ENTRY_SUBNODE.to_le_bytes());
            out.extend_from_slice(&vcn.to_le_bytes());
        }
    }
}

/// Length of a directory entry whose name has `units` UTF-16 units.
pub fn file_name_entry_len(units: usize) -> usize {
    (16 + 0x42 + 2 * units).div_ceil(8) * 8
}

fn end_entry(out: &mut Vec<u8>, child: Option<u64>) {
    let len: u16 = if child.is_some() { 24 } else { 16 };
    let flags = ENTRY_END | if child.is_some() { ENTRY_SUBNODE } else { 0 };
    let at = out.len();
    out.resize(at + len as usize, 0);
    out[at + 8..at + 10].copy_from_slice(&len.to_le_bytes());
    out[at + 12..at + 14].copy_from_slice(&flags.to_le_bytes());
    if let Some(vcn) = child {
        out[at + 16..at + 24].copy_from_slice(&vcn.to_le_bytes());
    }
}

/// Compare two names as `COLLATION_FILE_NAME` does: upper-cased unit by
/// unit through `upcase`, the shorter first; exact units break ties.
pub fn collate_names(a: &[u16], b: &[u16], upcase: &[u16]) -> Ordering {
    let up = |u: u16| upcase.get(u as usize).copied().unwrap_or(u);
    let folded = a.iter().map(|&u| up(u)).cmp(b.iter().map(|&u| up(u)));
    folded.then_with(|| a.cmp(b))
}

/// An item of one tree level: an entry and the node on its left.
#[derive(Debug, Clone, Copy)]
struct Item {
    entry: usize,
    child: Option<u64>,
}

/// A node: its items and the child its end marker points to.
#[derive(Debug, Clone)]
struct Node {
    items: Vec<Item>,
    end_child: Option<u64>,
}

/// A node's items and the separator promoted after it (none for a level's
/// last node).
type NodeAndSeparator = (Vec<Item>, Option<Item>);

/// The tree's shape: root node and blocks (block `i` is VCN `i`).
#[derive(Debug, Clone)]
struct Shape {
    root: Node,
    blocks: Vec<Node>,
}

fn item_len(lens: &[usize], it: &Item) -> usize {
    lens[it.entry] + if it.child.is_some() { 8 } else { 0 }
}

fn node_len(lens: &[usize], items: &[Item], end_child: Option<u64>) -> usize {
    items.iter().map(|i| item_len(lens, i)).sum::<usize>()
        + if end_child.is_some() { 24 } else { 16 }
}

/// Split one level into nodes of at most [`BLOCK_ROOM`] bytes, returning
/// the nodes and the separators promoted between them.
fn split(
    lens: &[usize],
    items: &[Item],
    trailing: Option<u64>,
) -> Result<Vec<NodeAndSeparator>, IndexError> {
    if items.is_empty() {
        // An empty index forced into blocks: one leaf with its end marker.
        return Ok(vec![(Vec::new(), None)]);
    }
    let total: usize = items.iter().map(|i| item_len(lens, i)).sum();
    let mut n = total.div_ceil(BLOCK_ROOM - 24).max(1);
    loop {
        if n > items.len() {
            return Err(IndexError::EntryTooLarge);
        }
        let target = total / n;
        let mut nodes: Vec<NodeAndSeparator> = Vec::new();
        let mut cur: Vec<Item> = Vec::new();
        let mut acc = 0usize;
        let mut i = 0;
        while i < items.len() {
            let it = items[i];
            if nodes.len() + 1 < n && acc >= target && !cur.is_empty() && i + 1 < items.len() {
                nodes.push((std::mem::take(&mut cur), Some(it)));
                acc = 0;
                i += 1;
                continue;
            }
            acc += item_len(lens, &it);
            cur.push(it);
            i += 1;
        }
        nodes.push((cur, None));
        let fits = nodes.iter().all(|(node, sep)| {
            let end = match sep {
                Some(s) => s.child,
                None => trailing,
            };
            !node.is_empty() && node_len(lens, node, end) <= BLOCK_ROOM
        });
        if fits {
            return Ok(nodes);
        }
        n += 1;
    }
}

/// Build the tree's shape for entries of `lens` (sorted), given the bytes
/// the root may use for entries when the index is small (`small_room`) and
/// when it has blocks (`large_room`, a function of the block count, since
/// the block bitmap and allocation live in the same record).
fn shape(
    lens: &[usize],
    small_room: usize,
    large_room: &dyn Fn(usize) -> usize,
) -> Result<Shape, IndexError> {
    let mut items: Vec<Item> = (0..lens.len())
        .map(|entry| Item { entry, child: None })
        .collect();
    if node_len(lens, &items, None) <= small_room {
        return Ok(Shape {
            root: Node {
                items,
                end_child: None,
            },
            blocks: Vec::new(),
        });
    }
    let mut blocks: Vec<Node> = Vec::new();
    let mut trailing: Option<u64> = None;
    loop {
        let nodes = split(lens, &items, trailing)?;
        let mut next = Vec::new();
        let count = nodes.len();
        for (k, (node_items, sep)) in nodes.into_iter().enumerate() {
            let vcn = blocks.len() as u64;
            let end_child = match sep {
                Some(s) => s.child,
                None => trailing,
            };
            blocks.push(Node {
                items: node_items,
                end_child,
            });
            if let Some(s) = sep {
                next.push(Item {
                    entry: s.entry,
                    child: Some(vcn),
                });
            }
            if k + 1 == count {
                trailing = Some(vcn);
            }
        }
        items = next;
        // The root takes the level once it fits (the bitmap it shares the
        // record with grows with the block count).
        let room = large_room(blocks.len());
        if node_len(lens, &items, trailing) <= room {
            return Ok(Shape {
                root: Node {
                    items,
                    end_child: trailing,
                },
                blocks,
            });
        }
        if items.is_empty() {
            return Err(IndexError::RootTooSmall);
        }
    }
}

/// An index that cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// An entry is larger than a block can hold.
    #[error("an index entry does not fit a 4 KiB index block")]
    EntryTooLarge,
    /// The record has no room even for a root holding one end marker.
    #[error("the index root does not fit its MFT record")]
    RootTooSmall,
}

/// Bytes of the `$BITMAP` value for `blocks` index blocks (whole 8 bytes).
pub fn bitmap_len(blocks: usize) -> usize {
    blocks.div_ceil(64).max(1) * 8
}

/// Index blocks needed for entries of `lens`, with the same rooms as
/// [`build`].
pub fn blocks_needed(
    lens: &[usize],
    small_room: usize,
    large_room: &dyn Fn(usize) -> usize,
) -> Result<usize, IndexError> {
    Ok(shape(lens, small_room, large_room)?.blocks.len())
}

/// A built index.
#[derive(Debug, Clone)]
pub struct BuiltIndex {
    /// The `$INDEX_ROOT` value.
    pub root: Vec<u8>,
    /// `INDX` blocks in VCN order, update sequence applied.
    pub blocks: Vec<Vec<u8>>,
    /// The `$BITMAP` value (every block in use).
    pub bitmap: Vec<u8>,
}

/// Build an index over `entries` (sorted by `collation`), indexing
/// attribute type `indexed` (`0x30` for `$I30`, 0 for view indexes).
pub fn build(
    entries: &[Entry],
    indexed: u32,
    collation: u32,
    small_room: usize,
    large_room: &dyn Fn(usize) -> usize,
    usn: u16,
) -> Result<BuiltIndex, IndexError> {
    let lens: Vec<usize> = entries.iter().map(Entry::len).collect();
    let s = shape(&lens, small_room, large_room)?;
    let large = !s.blocks.is_empty();
    let write_node = |node: &Node, out: &mut Vec<u8>| {
        for it in &node.items {
            entries[it.entry].write(out, it.child);
        }
        end_entry(out, node.end_child);
    };
    let mut root = vec![0u8; ROOT_FIXED];
    root[0..4].copy_from_slice(&indexed.to_le_bytes());
    root[4..8].copy_from_slice(&collation.to_le_bytes());
    root[8..12].copy_from_slice(&(INDEX_BLOCK as u32).to_le_bytes());
    root[12] = 1; // clusters per index block (4 KiB clusters)
    write_node(&s.root, &mut root);
    let len = (root.len() - 0x10) as u32;
    root[0x10..0x14].copy_from_slice(&0x10u32.to_le_bytes());
    root[0x14..0x18].copy_from_slice(&len.to_le_bytes());
    root[0x18..0x1C].copy_from_slice(&len.to_le_bytes());
    root[0x1C] = if large { HAS_CHILDREN } else { 0 };
    let mut blocks = Vec::with_capacity(s.blocks.len());
    for (vcn, node) in s.blocks.iter().enumerate() {
        let mut b = vec![0u8; BLOCK_ENTRIES];
        b[0..4].copy_from_slice(b"INDX");
        b[4..6].copy_from_slice(&(BLOCK_USA as u16).to_le_bytes());
        b[6..8].copy_from_slice(&((INDEX_BLOCK / super::SECTOR + 1) as u16).to_le_bytes());
        b[0x10..0x18].copy_from_slice(&(vcn as u64).to_le_bytes());
        write_node(node, &mut b);
        let used = (b.len() - 0x18) as u32;
        b[0x18..0x1C].copy_from_slice(&((BLOCK_ENTRIES - 0x18) as u32).to_le_bytes());
        b[0x1C..0x20].copy_from_slice(&used.to_le_bytes());
        b[0x20..0x24].copy_from_slice(&((INDEX_BLOCK - 0x18) as u32).to_le_bytes());
        b[0x24] = if node.items.iter().any(|i| i.child.is_some()) || node.end_child.is_some() {
            HAS_CHILDREN
        } else {
            0
        };
        b.resize(INDEX_BLOCK, 0);
        protect(&mut b, BLOCK_USA, usn);
        blocks.push(b);
    }
    let mut bitmap = vec![0u8; bitmap_len(blocks.len())];
    for i in 0..blocks.len() {
        bitmap[i / 8] |= 1 << (i % 8);
    }
    Ok(BuiltIndex {
        root,
        blocks,
        bitmap,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<Entry> {
        (0..n)
            .map(|i| {
                let name: Vec<u8> = format!("file number {i:06} with a longish name.txt")
                    .encode_utf16()
                    .flat_map(|u| u.to_le_bytes())
                    .collect();
                let mut key = vec![0u8; 0x42];
                key[0x40] = (name.len() / 2) as u8;
                key.extend_from_slice(&name);
                Entry::file_name(1000 + i as u64, &key)
            })
            .collect()
    }

    #[test]
    fn small_indexes_stay_in_the_root() {
        let e = names(3);
        let b = build(&e, 0x30, COLLATION_FILE_NAME, 600, &|_| 300, 1).unwrap();
        assert!(b.blocks.is_empty());
        assert_eq!(b.root[0x1C], 0);
    }

    #[test]
    fn large_indexes_grow_levels_and_every_entry_appears_once() {
        for n in [10usize, 200, 5000] {
            let e = names(n);
            let lens: Vec<usize> = e.iter().map(Entry::len).collect();
            let want = blocks_needed(&lens, 200, &|_| 200).unwrap();
            let b = build(&e, 0x30, COLLATION_FILE_NAME, 200, &|_| 200, 1).unwrap();
            assert_eq!(b.blocks.len(), want);
            // Count file references across root and blocks.
            let mut seen = vec![0u32; n];
            let mut scan = |buf: &[u8], start: usize| {
                let mut at = start;
                loop {
                    let len = u16::from_le_bytes([buf[at + 8], buf[at + 9]]) as usize;
                    let flags = u16::from_le_bytes([buf[at + 12], buf[at + 13]]);
                    if flags & ENTRY_END != 0 {
                        break;
                    }
                    let r = u64::from_le_bytes(buf[at..at + 8].try_into().unwrap());
                    seen[(r - 1000) as usize] += 1;
                    at += len;
                }
            };
            scan(&b.root, 0x20);
            for blk in &b.blocks {
                let mut blk = blk.clone();
                caseload_fs::ntfs::mft::apply_fixups(&mut blk, b"INDX").unwrap();
                scan(&blk, 0x40);
            }
            assert!(seen.iter().all(|&c| c == 1), "n={n}");
        }
    }

    #[test]
    fn names_collate_case_blind_then_exact() {
        let up: Vec<u16> = (0..=0xFFFFu32)
            .map(|u| {
                if (0x61..=0x7A).contains(&u) {
                    (u - 32) as u16
                } else {
                    u as u16
                }
            })
            .collect();
        let w = |s: &str| s.encode_utf16().collect::<Vec<u16>>();
        assert_eq!(collate_names(&w("abc"), &w("ABD"), &up), Ordering::Less);
        assert_eq!(collate_names(&w("$MFT"), &w("."), &up), Ordering::Less);
        assert_eq!(collate_names(&w("ab"), &w("abc"), &up), Ordering::Less);
        assert_eq!(collate_names(&w("_x"), &w("ax"), &up), Ordering::Greater);
    }
}
