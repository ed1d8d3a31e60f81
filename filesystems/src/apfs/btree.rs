//! APFS B-tree nodes (`btree_node_phys_t`): the table of contents, fixed
//! and variable-size keys and values, the root's `btree_info_t`, and an
//! in-order scan from a lower bound that follows child pointers with
//! every offset checked, a depth limit, a level check (a child must sit
//! one level below its parent, which also stops a node pointing to
//! itself or to an ancestor) and a budget of nodes per scan.

use std::cmp::Ordering;
use std::ops::ControlFlow;
use std::sync::Arc;

use crate::bytes::{u16_at, u32_at, u64_at};
use crate::error::{ErrorKind, ProcessingError};

use super::object::{HEADER_LEN, ObjHeader, TYPE_BTREE, TYPE_BTREE_NODE};

/// `btn_flags`: root node (it ends with a `btree_info_t`).
pub const NODE_ROOT: u16 = 0x1;
/// `btn_flags`: leaf node.
pub const NODE_LEAF: u16 = 0x2;
/// `btn_flags`: keys and values of fixed size (table entries are
/// `kvoff_t`).
pub const NODE_FIXED_KV: u16 = 0x4;
/// Bytes of `btree_info_t` at the end of a root node.
pub const INFO_LEN: usize = 40;
/// Deepest tree followed (real trees are a handful of levels).
pub const MAX_DEPTH: u16 = 32;
/// Most nodes one scan reads (a hostile tree whose index nodes share
/// children cannot make a scan revisit nodes without end).
pub const MAX_NODES_PER_SCAN: u64 = 1 << 20;
/// Offset of the node's data area (table of contents first).
const DATA_START: usize = HEADER_LEN + 24;

/// Sizes of a fixed-size tree's keys and values, from its root's
/// `btree_info_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeInfo {
    /// `bt_flags`.
    pub flags: u32,
    /// `bt_node_size`.
    pub node_size: u32,
    /// `bt_key_size` (0 for variable-size keys).
    pub key_size: u32,
    /// `bt_val_size` (0 for variable-size values).
    pub val_size: u32,
}

/// A parsed node: its header and where each entry's key and value are.
#[derive(Debug, Clone)]
pub struct Node {
    buf: Arc<[u8]>,
    /// `btn_flags`.
    pub flags: u16,
    /// `btn_level` (0 for leaves).
    pub level: u16,
    /// (key offset, key length, value offset, value length) of each entry;
    /// a value length of `usize::MAX` marks a ghost entry (no value).
    entries: Vec<(usize, usize, usize, usize)>,
}

impl Node {
    /// Parses the node in `buf` (a whole block). `fixed` gives the key and
    /// value sizes of fixed-size trees (from the root's info; a root node
    /// supplies its own). Every table entry is checked against the node.
    pub fn parse(buf: Arc<[u8]>, fixed: Option<TreeInfo>) -> Result<Node, String> {
        let hdr = ObjHeader::parse(&buf).ok_or("node shorter than its header")?;
        if !matches!(hdr.kind(), TYPE_BTREE | TYPE_BTREE_NODE) {
            return Err(format!(
                "object type {:#x} is not a B-tree node",
                hdr.kind()
            ));
        }
        let flags = u16_at(&buf, 32).ok_or("short node")?;
        let level = u16_at(&buf, 34).ok_or("short node")?;
        let nkeys = u32_at(&buf, 36).ok_or("short node")? as usize;
        let toc_off = u16_at(&buf, 40).ok_or("short node")? as usize;
        let toc_len = u16_at(&buf, 42).ok_or("short node")? as usize;
        let leaf = flags & NODE_LEAF != 0;
        if leaf != (level == 0) {
            return Err(format!("leaf flag {leaf} does not match level {level}"));
        }
        let root = flags & NODE_ROOT != 0;
        let info = if root { Some(root_info(&buf)?) } else { fixed };
        let val_end = if root {
            buf.len()
                .checked_sub(INFO_LEN)
                .ok_or("root node too small")?
        } else {
            buf.len()
        };
        let toc_start = DATA_START + toc_off;
        let key_start = toc_start + toc_len;
        if key_start > val_end {
            return Err(format!(
                "table of contents ({toc_off}+{toc_len}) runs past the node"
            ));
        }
        let fixed_kv = flags & NODE_FIXED_KV != 0;
        let toc_entry = if fixed_kv { 4 } else { 8 };
        if nkeys.checked_mul(toc_entry).is_none_or(|n| n > toc_len) {
            return Err(format!(
                "{nkeys} keys do not fit a table of contents of {toc_len} bytes"
            ));
        }
        let (ksize, vsize) = if fixed_kv {
            let i = info.ok_or("fixed-size node without tree info")?;
            let v = if leaf { i.val_size as usize } else { 8 };
            (i.key_size as usize, v)
        } else {
            (0, 0)
        };
        let mut entries = Vec::with_capacity(nkeys);
        for i in 0..nkeys {
            let t = toc_start + i * toc_entry;
            let (ko, kl, vo, vl) = if fixed_kv {
                let ko = u16_at(&buf, t).ok_or("short toc")? as usize;
                let vo = u16_at(&buf, t + 2).ok_or("short toc")? as usize;
                (ko, ksize, vo, vsize)
            } else {
                (
                    u16_at(&buf, t).ok_or("short toc")? as usize,
                    u16_at(&buf, t + 2).ok_or("short toc")? as usize,
                    u16_at(&buf, t + 4).ok_or("short toc")? as usize,
                    u16_at(&buf, t + 6).ok_or("short toc")? as usize,
                )
            };
            let k = key_start + ko;
            if k + kl > val_end {
                return Err(format!("key {i} ({ko}+{kl}) runs past the node"));
            }
            if vo == 0xffff {
                entries.push((k, kl, 0, usize::MAX));
                continue;
            }
            let v = val_end
                .checked_sub(vo)
                .filter(|&v| v >= key_start && v + vl <= val_end)
                .ok_or_else(|| format!("value {i} ({vo}, {vl} bytes) lies outside the node"))?;
            entries.push((k, kl, v, vl));
        }
        Ok(Node {
            buf,
            flags,
            level,
            entries,
        })
    }

    /// Whether this is a leaf.
    pub fn is_leaf(&self) -> bool {
        self.level == 0
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the node has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entry `i`'s key and value (`None` for a ghost entry's value).
    pub fn entry(&self, i: usize) -> Option<(&[u8], Option<&[u8]>)> {
        let &(k, kl, v, vl) = self.entries.get(i)?;
        let key = self.buf.get(k..k + kl)?;
        let val = if vl == usize::MAX {
            None
        } else {
            self.buf.get(v..v + vl)
        };
        Some((key, val))
    }

    /// The child an index entry points to (the first 8 bytes of its value).
    pub fn child(&self, i: usize) -> Option<u64> {
        self.entry(i)
            .and_then(|(_, v)| v)
            .and_then(|v| u64_at(v, 0))
    }
}

/// The `btree_info_t` at the end of a root node.
pub fn root_info(buf: &[u8]) -> Result<TreeInfo, String> {
    let at = buf
        .len()
        .checked_sub(INFO_LEN)
        .ok_or("root node too small")?;
    let f = |o: usize| u32_at(buf, at + o).ok_or("short tree info");
    Ok(TreeInfo {
        flags: f(0)?,
        node_size: f(4)?,
        key_size: f(8)?,
        val_size: f(12)?,
    })
}

/// Where a scan reads its nodes: `load(ptr)` gives the node a child
/// pointer (a physical address, or a virtual oid resolved through an
/// object map) refers to, with the absolute byte offset it was read from.
pub(crate) type Loader<'a> = dyn Fn(u64) -> Result<(Arc<[u8]>, u64), ProcessingError> + 'a;

/// What a scan calls with each entry's key and value; it breaks to stop.
pub(crate) type Visit<'a> = dyn FnMut(&[u8], &[u8]) -> ControlFlow<()> + 'a;

/// An in-order scan of a tree from its root pointer: entries whose key
/// `lower` orders `Less` are skipped, every other one goes to `visit` until
/// it breaks. Damage (an unreadable node, a bad table of contents, a loop,
/// too deep a tree) is pushed to `errors` and that subtree is skipped.
pub(crate) struct Scan<'a> {
    /// Loads a node.
    pub load: &'a Loader<'a>,
    /// Orders a key against the scan's lower bound.
    pub lower: &'a dyn Fn(&[u8]) -> Ordering,
    /// Problems met.
    pub errors: &'a mut Vec<ProcessingError>,
    /// Nodes read so far.
    pub nodes: u64,
}

impl<'a> Scan<'a> {
    /// A scan reading nodes with `load`, from the first key `lower` does not
    /// order `Less`, pushing damage to `errors`.
    pub fn new(
        load: &'a Loader<'a>,
        lower: &'a dyn Fn(&[u8]) -> Ordering,
        errors: &'a mut Vec<ProcessingError>,
    ) -> Self {
        Scan {
            load,
            lower,
            errors,
            nodes: 0,
        }
    }

    /// Runs the scan from the root at `root`.
    pub fn run(&mut self, root: u64, visit: &mut Visit<'_>) -> ControlFlow<()> {
        let mut path = Vec::new();
        self.node(root, None, None, true, &mut path, visit)
    }

    fn node(
        &mut self,
        ptr: u64,
        parent_level: Option<u16>,
        info: Option<TreeInfo>,
        first: bool,
        path: &mut Vec<u64>,
        visit: &mut Visit<'_>,
    ) -> ControlFlow<()> {
        self.nodes += 1;
        if self.nodes > MAX_NODES_PER_SCAN {
            if self.nodes == MAX_NODES_PER_SCAN + 1 {
                self.errors.push(ProcessingError::new(
                    ErrorKind::WalkLimit,
                    format!("B-tree scan stopped after {MAX_NODES_PER_SCAN} nodes"),
                ));
            }
            return ControlFlow::Break(());
        }
        if path.contains(&ptr) || path.len() >= usize::from(MAX_DEPTH) {
            self.errors.push(ProcessingError::new(
                ErrorKind::DirectoryLoop,
                format!(
                    "B-tree node {ptr:#x} is its own ancestor or the tree is deeper than {MAX_DEPTH}: subtree skipped"
                ),
            ));
            return ControlFlow::Continue(());
        }
        let (buf, at) = match (self.load)(ptr) {
            Ok(b) => b,
            Err(e) => {
                self.errors.push(e);
                return ControlFlow::Continue(());
            }
        };
        let node = match Node::parse(buf.clone(), info) {
            Ok(n) => n,
            Err(why) => {
                self.errors.push(ProcessingError::at(
                    ErrorKind::CorruptFileSystem,
                    at,
                    format!("B-tree node {ptr:#x}: {why}"),
                ));
                return ControlFlow::Continue(());
            }
        };
        let info = if node.flags & NODE_ROOT != 0 {
            root_info(&buf).ok()
        } else {
            info
        };
        if let Some(pl) = parent_level
            && pl.checked_sub(1) != Some(node.level)
        {
            self.errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                at,
                format!(
                    "B-tree node {ptr:#x} is at level {} below a node of level {pl}: subtree skipped",
                    node.level
                ),
            ));
            return ControlFlow::Continue(());
        }
        if node.is_leaf() {
            for i in 0..node.len() {
                let Some((k, Some(v))) = node.entry(i) else {
                    continue;
                };
                if first && (self.lower)(k) == Ordering::Less {
                    continue;
                }
                visit(k, v)?;
            }
            return ControlFlow::Continue(());
        }
        let start = if first {
            (0..node.len())
                .rev()
                .find(|&i| {
                    node.entry(i)
                        .is_some_and(|(k, _)| (self.lower)(k) == Ordering::Less)
                })
                .unwrap_or(0)
        } else {
            0
        };
        path.push(ptr);
        for i in start..node.len() {
            let Some(child) = node.child(i) else {
                continue;
            };
            let r = self.node(
                child,
                Some(node.level),
                info,
                first && i == start,
                path,
                visit,
            );
            if r.is_break() {
                path.pop();
                return r;
            }
        }
        path.pop();
        ControlFlow::Continue(())
    }
}
