//! Directory (`$I30`) index listing.
//!
//! Parsed here rather than with the `ntfs` crate's `NtfsIndex`: the crate
//! walks the B-tree through subnode pointers, so subnodes pointing back up
//! the tree make it loop, and an index entry whose length is 0 makes it
//! panic (`ntfs` 0.4.0 subtracts 8 from the length in `subnode_vcn`; seen
//! with a crafted root index) or, without overflow checks, spin. This
//! lists entries node by node as TSK does (the index root, then each index
//! block the index bitmap marks in use, in VCN order), so every node is read
//! once whatever the pointers say.

use crate::bytes::{u16_at, u32_at, u64_at};
use crate::error::{ErrorKind, ProcessingError};
use crate::read::ReadAt;

use super::filename::{self, FileName};
use super::mft::{self, ATTR_BITMAP, ATTR_INDEX_ALLOCATION, ATTR_INDEX_ROOT, Attribute, Body};
use super::{Loaded, NtfsFs};

/// Most entries listed from one directory.
const MAX_ENTRIES: usize = 1 << 20;
/// Most index blocks read from one directory.
const MAX_BLOCKS: u64 = 1 << 20;

/// One live entry of a directory index.
pub(crate) struct IndexEntry {
    /// File reference (record number and sequence) the entry names.
    pub file_ref: u64,
    pub name: FileName,
    /// Absolute offset of the entry, for error messages.
    pub offset: u64,
}

fn is_i30(a: &Attribute) -> bool {
    a.name_is("$I30")
}

/// A directory's `$I30` index, read one node at a time (the index root,
/// then each in-use index block in VCN order) so a walk holds one node per
/// level of the tree, whatever the directory's size.
pub(crate) struct IndexNodes {
    record: u64,
    at: u64,
    root: Option<Vec<u8>>,
    block_size: u64,
    runs: Vec<mft::DataRun>,
    bitmap: Option<Vec<u8>>,
    blocks: u64,
    next_block: u64,
    listed: usize,
}

impl IndexNodes {
    /// Prepares the listing of `dir`'s index; problems found are pushed to
    /// `errors` (a directory without a usable index lists nothing).
    pub(crate) fn new<R: ReadAt>(
        fs: &NtfsFs<R>,
        dir: &Loaded,
        errors: &mut Vec<ProcessingError>,
    ) -> Self {
        let at = fs.record_offset(dir.record).unwrap_or(0);
        let mut nodes = IndexNodes {
            record: dir.record,
            at,
            root: None,
            block_size: 0,
            runs: Vec::new(),
            bitmap: None,
            blocks: 0,
            next_block: 0,
            listed: 0,
        };
        let Some(root) = dir
            .attrs
            .iter()
            .find(|a| a.ty == ATTR_INDEX_ROOT && is_i30(a))
            .and_then(Attribute::resident)
        else {
            errors.push(ProcessingError::at(
                ErrorKind::CorruptIndex,
                at,
                format!(
                    "directory record {} has no resident $I30 index root",
                    dir.record
                ),
            ));
            return nodes;
        };
        nodes.root = Some(root.to_vec());
        let block_size = u64::from(u32_at(root, 8).unwrap_or(0));
        let Some(alloc) = dir
            .attrs
            .iter()
            .find(|a| a.ty == ATTR_INDEX_ALLOCATION && is_i30(a))
        else {
            return nodes;
        };
        if !block_size.is_power_of_two() || !(512..=65536).contains(&block_size) {
            errors.push(ProcessingError::at(
                ErrorKind::CorruptIndex,
                at,
                format!(
                    "directory record {}: index block size {block_size}",
                    dir.record
                ),
            ));
            return nodes;
        }
        let Body::NonResident(nr) = &alloc.body else {
            errors.push(ProcessingError::at(
                ErrorKind::CorruptIndex,
                at,
                format!(
                    "directory record {}: resident $INDEX_ALLOCATION",
                    dir.record
                ),
            ));
            return nodes;
        };
        // Pieces of the allocation may sit in extension records.
        let mut pieces: Vec<&mft::NonResident> = dir
            .attrs
            .iter()
            .filter(|a| a.ty == ATTR_INDEX_ALLOCATION && is_i30(a))
            .filter_map(|a| match &a.body {
                Body::NonResident(p) => Some(p),
                Body::Resident(_) => None,
            })
            .collect();
        pieces.sort_by_key(|p| p.start_vcn);
        for p in pieces {
            let (r, err) = mft::decode_runs(&p.runs, p.start_vcn, fs.info.total_clusters);
            if let Some(e) = err {
                errors.push(ProcessingError::at(
                    ErrorKind::CorruptIndex,
                    at,
                    format!("directory record {} index allocation runs: {e}", dir.record),
                ));
            }
            nodes.runs.extend(r);
        }
        nodes.bitmap = dir
            .attrs
            .iter()
            .find(|a| a.ty == ATTR_BITMAP && is_i30(a))
            .and_then(|a| match &a.body {
                Body::Resident(v) => Some(v.clone()),
                Body::NonResident(b) => {
                    let (r, _) = mft::decode_runs(&b.runs, 0, fs.info.total_clusters);
                    let len = usize::try_from(b.data_size.min(MAX_BLOCKS / 8)).unwrap_or(0);
                    let mut v = vec![0u8; len];
                    fs.read_runs(&r, 0, &mut v, false).ok().map(|()| v)
                }
            });
        nodes.block_size = block_size;
        nodes.blocks = (nr.data_size / block_size).min(MAX_BLOCKS);
        nodes
    }

    /// The live entries of the next node, or `None` when all are read.
    pub(crate) fn next_node<R: ReadAt>(
        &mut self,
        fs: &NtfsFs<R>,
        errors: &mut Vec<ProcessingError>,
    ) -> Option<Vec<IndexEntry>> {
        let mut out = Vec::new();
        if let Some(root) = self.root.take() {
            match node_bounds(&root, 16) {
                Some((s, e)) => parse_node(&root, s, e, self.at, &mut out, errors),
                None => errors.push(ProcessingError::at(
                    ErrorKind::CorruptIndex,
                    self.at,
                    format!(
                        "directory record {}: index root node header invalid",
                        self.record
                    ),
                )),
            }
            self.listed += out.len();
            return Some(out);
        }
        while self.next_block < self.blocks {
            let i = self.next_block;
            self.next_block += 1;
            if let Some(bm) = &self.bitmap {
                let byte = usize::try_from(i / 8).unwrap_or(usize::MAX);
                if bm.get(byte).is_none_or(|b| b & (1 << (i % 8)) == 0) {
                    continue;
                }
            }
            if self.listed >= MAX_ENTRIES {
                errors.push(ProcessingError::at(
                    ErrorKind::WalkLimit,
                    self.at,
                    format!(
                        "directory record {} lists more than {MAX_ENTRIES} entries; the rest is not read",
                        self.record
                    ),
                ));
                self.next_block = self.blocks;
                return None;
            }
            let pos = i * self.block_size;
            let abs = block_offset(fs, &self.runs, pos).unwrap_or(self.at);
            let mut block = vec![0u8; usize::try_from(self.block_size).unwrap_or(4096)];
            if let Err(e) = fs.read_runs(&self.runs, pos, &mut block, false) {
                errors.push(ProcessingError::at(
                    ErrorKind::Io,
                    abs,
                    format!("directory record {} index block {i}: {e}", self.record),
                ));
                continue;
            }
            if let Err(e) = mft::apply_fixups(&mut block, b"INDX") {
                errors.push(ProcessingError::at(
                    ErrorKind::CorruptIndex,
                    abs,
                    format!("directory record {} index block {i}: {e}", self.record),
                ));
                continue;
            }
            match node_bounds(&block, 24) {
                Some((s, e)) => parse_node(&block, s, e, abs, &mut out, errors),
                None => errors.push(ProcessingError::at(
                    ErrorKind::CorruptIndex,
                    abs,
                    format!(
                        "directory record {} index block {i}: node header invalid",
                        self.record
                    ),
                )),
            }
            self.listed += out.len();
            return Some(out);
        }
        None
    }
}

fn block_offset<R: ReadAt>(fs: &NtfsFs<R>, runs: &[mft::DataRun], pos: u64) -> Option<u64> {
    let cs = fs.cs();
    let vcn = pos / cs;
    let r = runs
        .iter()
        .find(|r| vcn >= r.vcn && vcn - r.vcn < r.clusters)?;
    Some(fs.base + r.lcn? * cs + (pos - r.vcn * cs))
}

/// Entry area `[start, end)` of the index node whose header is at `hdr`.
fn node_bounds(buf: &[u8], hdr: usize) -> Option<(usize, usize)> {
    let first = usize::try_from(u32_at(buf, hdr)?).ok()?;
    let used = usize::try_from(u32_at(buf, hdr + 4)?).ok()?;
    let start = hdr.checked_add(first)?;
    let end = hdr.checked_add(used)?;
    (start <= end && end <= buf.len()).then_some((start, end))
}

/// Parses the entries of one node up to its last-entry marker.
fn parse_node(
    buf: &[u8],
    start: usize,
    end: usize,
    abs: u64,
    out: &mut Vec<IndexEntry>,
    errors: &mut Vec<ProcessingError>,
) {
    let mut off = start;
    loop {
        let (Some(fref), Some(len), Some(key_len), Some(flags)) = (
            u64_at(buf, off),
            u16_at(buf, off + 8),
            u16_at(buf, off + 10),
            u16_at(buf, off + 12),
        ) else {
            errors.push(ProcessingError::at(
                ErrorKind::CorruptIndex,
                abs + off as u64,
                "index node ends without its last-entry marker",
            ));
            return;
        };
        let len = usize::from(len);
        if len < 16 || off + len > end {
            errors.push(ProcessingError::at(
                ErrorKind::CorruptIndex,
                abs + off as u64,
                format!("index entry length {len} does not fit its node"),
            ));
            return;
        }
        if flags & 0x02 != 0 {
            return;
        }
        let key_len = usize::from(key_len);
        if key_len > len - 16 {
            errors.push(ProcessingError::at(
                ErrorKind::CorruptIndex,
                abs + off as u64,
                format!("index key length {key_len} exceeds its {len}-byte entry"),
            ));
            return;
        }
        let key = &buf[off + 16..off + 16 + key_len];
        match filename::parse(key, abs + off as u64 + 16) {
            Ok(name) => out.push(IndexEntry {
                file_ref: fref,
                name,
                offset: abs + off as u64,
            }),
            Err(e) => errors.push(ProcessingError::at(
                ErrorKind::CorruptIndex,
                abs + off as u64,
                format!("index entry name: {e}"),
            )),
        }
        if out.len() >= MAX_ENTRIES {
            return;
        }
        off += len;
    }
}
