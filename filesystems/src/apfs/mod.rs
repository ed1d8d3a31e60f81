//! APFS containers, read here rather than with a crate. The APFS readers
//! on crates.io are path-based file APIs (`apfs` 0.2 opens files by path
//! and returns their bytes; others are FUSE drivers or bindings to
//! libfsapfs) that give neither the physical extents behind a file nor
//! the space manager's free blocks, and do not read through this crate's
//! bounded positioned reads. Records must line up with The Sleuth Kit's
//! pool layer (`pstat`, `fls -P apfs -B <APSB block>`, `icat`), carving
//! needs the free blocks, and hostile input must give positioned errors:
//! so this module reads the on-disk structures itself, following Apple's
//! "Apple File System Reference" (also libfsapfs's format document and
//! apfsprogs' `raw.h`).
//!
//! # The model (TSK 4.11's `apfs` pool and file system)
//!
//! - The container: the newest checkpoint whose superblock and checkpoint
//!   map verify ([`container`]); the container object map resolves each
//!   volume's superblock; each volume's object map resolves its
//!   file-system tree's nodes at the checkpoint's transaction.
//! - Inode numbers are APFS object ids, as TSK reports them (the root is
//!   2). Paths are the names from the root down (`fls -r -p`); the private
//!   directory (3) and anything not reached from the root is not listed
//!   (TSK lists neither). There are no deleted names: APFS leaves none in
//!   the current tree and TSK lists none.
//! - Volumes: a container of one volume gives that volume's records with
//!   paths exactly as `fls -P apfs -B <block>` prints them. A container
//!   of several volumes gives, for each (in `nx_fs_oid` order), a virtual
//!   directory `$Volume<i>` (i from 0; its inode is the volume
//!   superblock's block, the number TSK's `-B` takes) with that volume's
//!   records under it. [`ApfsFs::volumes`] names each. Inode numbers are
//!   per volume, as TSK's are (each volume's root is 2), so records of
//!   different volumes can share one: the path tells them apart.
//! - Encrypted volumes are listed (their `$Volume<i>` where there are
//!   several) and not walked: an [`ErrorKind::EncryptedVolume`] error
//!   names the volume. Snapshots are listed in [`VolumeInfo::snapshots`] and
//!   noted once per volume ([`ErrorKind::Snapshot`]); only the live tree is
//!   walked.
//! - Content: every file's physical runs from its file extents (holes and
//!   a size past the last extent read as zeros). Compressed files
//!   (`com.apple.decmpfs`, see [`decmpfs`]): zlib and LZVN, inline and in
//!   the resource fork, and stored data are decoded as TSK decodes them:
//!   inline data into the record (up to [`ApfsFs::set_decode_limit`]'s
//!   limit, 64 KiB by default), resource forks as
//!   [`crate::Content::Decmpfs`], the fork's runs decoded a 64 KiB block
//!   at a time as the content is read, whatever the file's size. The
//!   record's size is the uncompressed size (TSK's `fls` shows the absent
//!   data stream's 0; its `icat` gives the decoded bytes). Symbolic links
//!   have no content and size 0, as in TSK (their target is an attribute).
//! - Sealed volumes (macOS 11 and later system volumes): the file-system
//!   tree is followed by block address and extents are read from the
//!   volume's file-extent tree; no sealed image was at hand to test this,
//!   and seals (hashes) are not checked.
//! - Times are APFS's nanoseconds since 1970, UTC; mode (type included),
//!   uid and gid are the inode's ([`crate::Owner`]).
//! - Unallocated space ([`ApfsFs::unallocated_runs`]) is the space
//!   manager's chunk bitmaps, read as TSK's `pstat` reads them: a chunk
//!   whose free count equals its block count is wholly free without its
//!   bitmap being read.
//!
//! # Deliberate differences from TSK
//!
//! - Checksums of every object read are checked; a mismatch is reported
//!   (object id, block and byte offset), and the object is still used
//!   unless it is the checkpoint being chosen.
//! - Compressed files whose inline data does not decode or decodes to
//!   more than the limit, whose resource fork is missing, or that use a
//!   type TSK does not read (LZFSE, 11 and 12; stored, 9 and 10) are
//!   [`crate::Content::Encoded`] with [`crate::Encoding::ApfsCompressed`]
//!   (no runs) and an [`ErrorKind::ContentEncoded`] error. A resource
//!   fork's damage shows when it is read: an error naming the block.
//! - Sparse files: holes read as zeros; TSK 4.11's `icat` leaves them out
//!   (its runs ignore the extents' logical offsets), giving the stored
//!   extents one after another.
//! - A compressed file's size is its uncompressed size (TSK's `fls`: 0).
//! - Extents past the container's end are cut there and reported; a
//!   B-tree node that loops, sits at the wrong level, or points outside the
//!   container is reported and its subtree skipped.

pub mod btree;
pub mod container;
pub mod decmpfs;
pub mod fstree;
pub mod lzvn;
pub mod object;
mod walk;

use std::cmp::Ordering;
use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use crate::cache::ChunkCache;
use crate::error::{ErrorKind, FsError, ProcessingError};
use crate::read::{ReadAt, read_full};
use crate::record::{Extent, FileRecord};
use crate::walk::WalkSummary;

use self::btree::Scan;
use self::container::{Mapping, NxSuperblock, VolumeSuperblock, parse_checkpoint_map};
use self::fstree::Snapshot;
use self::object::{
    ObjHeader, TYPE_FS, TYPE_NX_SUPERBLOCK, TYPE_OMAP, TYPE_SPACEMAN, TYPE_SPACEMAN_CAB,
    TYPE_SPACEMAN_CIB, checksum_ok,
};

/// Default of [`ApfsFs::set_decode_limit`]: compressed files decoding to
/// more are reported encoded rather than decoded into the record.
pub const DEFAULT_DECODE_LIMIT: u64 = 64 << 10;
/// Blocks of metadata kept in memory.
const CACHE_BLOCKS: usize = 256;

/// One volume of the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeInfo {
    /// Position in the container's volume list (`nx_fs_oid`), from 0.
    pub index: usize,
    /// Virtual object id of the volume superblock.
    pub oid: u64,
    /// Block of the volume superblock (TSK's `-B`), if it was found.
    pub apsb_block: Option<u64>,
    /// The superblock, if it could be read.
    pub superblock: Option<VolumeSuperblock>,
    /// Physical address of the file-system tree's object-map B-tree root.
    omap_tree: Option<u64>,
    /// Snapshots, oldest first.
    pub snapshots: Vec<Snapshot>,
}

impl VolumeInfo {
    /// The volume's name ("" where its superblock could not be read).
    pub fn name(&self) -> &str {
        self.superblock.as_ref().map_or("", |s| s.name.as_str())
    }

    /// Whether the volume is encrypted (and so not walked).
    pub fn encrypted(&self) -> bool {
        self.superblock.as_ref().is_some_and(|s| s.encrypted())
    }
}

/// An opened APFS container.
pub struct ApfsFs<R> {
    src: R,
    base: u64,
    nx: NxSuperblock,
    nx_block: u64,
    ephemeral: Vec<Mapping>,
    omap_tree: u64,
    volumes: Vec<VolumeInfo>,
    open_errors: Vec<ProcessingError>,
    blocks: ChunkCache,
    /// Problems met while reading objects (checksums), noted once per
    /// block; those noted while opening are in [`ApfsFs::open_errors`],
    /// every walk reports the others it meets (see `noted_since`).
    noted: Mutex<(Vec<ProcessingError>, HashSet<u64>)>,
    /// How many of `noted` were met while opening.
    open_noted: usize,
    /// Most bytes a compressed file is decoded to in its record.
    decode_limit: u64,
}

impl<R: ReadAt> ApfsFs<R> {
    /// Opens the container whose first block is at byte `base` of `src`,
    /// `len` bytes long. No checkpoint verifying is an error; damage
    /// found beyond it (rejected checkpoints, unreadable volumes) is in
    /// [`ApfsFs::open_errors`].
    pub fn open(src: R, base: u64, len: u64) -> Result<Self, FsError> {
        let mut head = vec![0u8; 4096];
        let n = read_full(&src, &mut head, base).map_err(|e| FsError::io(base, 4096, e))?;
        head.truncate(n);
        let first =
            NxSuperblock::parse(&head).map_err(|r| FsError::not("APFS container superblock", r))?;
        let bs = first.block_size;
        let mut open_errors = Vec::new();
        let avail = len.min(src.len().saturating_sub(base)) / bs;
        if avail < first.block_count {
            open_errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                base,
                format!(
                    "container claims {} blocks but only {avail} are present",
                    first.block_count
                ),
            ));
        }
        let mut fs = ApfsFs {
            src,
            base,
            nx: first.clone(),
            nx_block: 0,
            ephemeral: Vec::new(),
            omap_tree: 0,
            volumes: Vec::new(),
            open_errors: Vec::new(),
            blocks: ChunkCache::new(bs, CACHE_BLOCKS),
            noted: Mutex::new((Vec::new(), HashSet::new())),
            open_noted: 0,
            decode_limit: DEFAULT_DECODE_LIMIT,
        };
        if first.xp_desc_blocks & 0x8000_0000 != 0 {
            return Err(FsError::not(
                "APFS container",
                "the checkpoint descriptor area is a B-tree, which this reader does not follow",
            ));
        }
        // Candidates: every verified superblock in the descriptor area,
        // newest first. Only the area's blocks that are present are read,
        // and at most MAX_DESC_BLOCKS of them.
        let claimed = u64::from(first.xp_desc_blocks);
        let area = claimed
            .min(
                first
                    .block_count
                    .min(avail)
                    .saturating_sub(first.xp_desc_base),
            )
            .min(container::MAX_DESC_BLOCKS);
        if area < claimed {
            open_errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                base,
                format!(
                    "checkpoint descriptor area claims {claimed} blocks from block {}; only {area} read",
                    first.xp_desc_base
                ),
            ));
        }
        let mut candidates = Vec::new();
        for i in 0..area {
            let b = first.xp_desc_base + i;
            let Ok(buf) = fs.raw_block(b) else { continue };
            let Some(h) = ObjHeader::parse(&buf) else {
                continue;
            };
            if h.kind() != TYPE_NX_SUPERBLOCK {
                continue;
            }
            if !checksum_ok(&buf) {
                open_errors.push(ProcessingError::at(
                    ErrorKind::ChecksumMismatch,
                    fs.block_offset(b),
                    format!("checkpoint superblock (transaction {}) at block {b}: Fletcher-64 checksum mismatch (bytes 0-7 of the object); checkpoint not used", h.xid),
                ));
                continue;
            }
            match NxSuperblock::parse(&buf) {
                Ok(sb) if sb.block_size == bs => candidates.push((sb, b)),
                Ok(_) => open_errors.push(ProcessingError::at(
                    ErrorKind::CorruptFileSystem,
                    fs.block_offset(b),
                    format!(
                        "checkpoint superblock at block {b} gives another block size; not used"
                    ),
                )),
                Err(why) => open_errors.push(ProcessingError::at(
                    ErrorKind::CorruptFileSystem,
                    fs.block_offset(b),
                    format!("checkpoint superblock at block {b}: {why}; not used"),
                )),
            }
        }
        candidates.sort_by_key(|c| std::cmp::Reverse(c.0.xid));
        let mut chosen = None;
        for (sb, b) in candidates {
            match fs.check_checkpoint(&sb, b) {
                Ok((maps, omap_tree)) => {
                    chosen = Some((sb, b, maps, omap_tree));
                    break;
                }
                Err(why) => open_errors.push(ProcessingError::at(
                    ErrorKind::CorruptFileSystem,
                    fs.block_offset(b),
                    format!(
                        "checkpoint of transaction {} (superblock at block {b}) rejected: {why}",
                        sb.xid
                    ),
                )),
            }
        }
        let Some((sb, b, maps, omap_tree)) = chosen else {
            let why: Vec<String> = open_errors.iter().map(|e| e.detail.clone()).collect();
            return Err(FsError::not(
                "APFS container",
                format!(
                    "no valid checkpoint ({})",
                    if why.is_empty() {
                        "no superblock in the checkpoint descriptor area".into()
                    } else {
                        why.join("; ")
                    }
                ),
            ));
        };
        fs.nx = sb;
        fs.nx_block = b;
        fs.ephemeral = maps;
        fs.omap_tree = omap_tree;
        fs.open_errors = open_errors;
        fs.load_volumes();
        let mut noted = 0;
        let met = fs.noted_since(&mut noted);
        fs.open_noted = noted;
        fs.open_errors.extend(met);
        Ok(fs)
    }

    /// Checks a checkpoint: its maps and the container object map.
    fn check_checkpoint(&self, sb: &NxSuperblock, at: u64) -> Result<(Vec<Mapping>, u64), String> {
        let mut maps = Vec::new();
        for b in sb.checkpoint_blocks() {
            if b == at {
                continue;
            }
            let buf = self.raw_block(b).map_err(|e| e.detail)?;
            let m = parse_checkpoint_map(&buf, sb.xid).map_err(|w| format!("block {b}: {w}"))?;
            maps.extend(m);
        }
        let omap = self.raw_block(sb.omap_oid).map_err(|e| e.detail)?;
        let h = ObjHeader::parse(&omap).ok_or("short object map")?;
        if h.kind() != TYPE_OMAP || !checksum_ok(&omap) {
            return Err(format!(
                "object map at block {} does not verify (type {:#x})",
                sb.omap_oid,
                h.kind()
            ));
        }
        let tree = crate::bytes::u64_at(&omap, 48).ok_or("short object map")?;
        if tree == 0 || tree >= sb.block_count {
            return Err(format!(
                "object-map tree at block {tree} outside the container"
            ));
        }
        Ok((maps, tree))
    }

    fn load_volumes(&mut self) {
        let xid = self.nx.xid;
        for (index, &oid) in self.nx.fs_oids.clone().iter().enumerate() {
            let mut vol = VolumeInfo {
                index,
                oid,
                apsb_block: None,
                superblock: None,
                omap_tree: None,
                snapshots: Vec::new(),
            };
            let mut errs = Vec::new();
            match self.omap_lookup(self.omap_tree, oid, xid, &mut errs) {
                Some(b) => {
                    vol.apsb_block = Some(b);
                    match self.object(b, TYPE_FS).and_then(|buf| {
                        VolumeSuperblock::parse(&buf).map_err(|w| {
                            ProcessingError::at(
                                ErrorKind::CorruptFileSystem,
                                self.block_offset(b),
                                w,
                            )
                        })
                    }) {
                        Ok(sb) => {
                            match self.object(sb.omap_oid, TYPE_OMAP) {
                                Ok(o) => match crate::bytes::u64_at(&o, 48) {
                                    Some(t) if t != 0 && t < self.nx.block_count => {
                                        vol.omap_tree = Some(t)
                                    }
                                    _ => errs.push(ProcessingError::at(
                                        ErrorKind::CorruptFileSystem,
                                        self.block_offset(sb.omap_oid),
                                        format!(
                                            "volume {index}: object-map tree outside the container"
                                        ),
                                    )),
                                },
                                Err(e) => errs.push(e),
                            }
                            if sb.snap_meta_tree_oid != 0 && !sb.encrypted() {
                                vol.snapshots = self.snapshots(sb.snap_meta_tree_oid, &mut errs);
                            }
                            vol.superblock = Some(sb);
                        }
                        Err(e) => errs.push(e),
                    }
                }
                None => errs.push(ProcessingError::new(
                    ErrorKind::CorruptFileSystem,
                    format!("volume {index} (oid {oid:#x}) is not in the container's object map"),
                )),
            }
            self.open_errors.extend(errs);
            self.volumes.push(vol);
        }
    }

    fn snapshots(&self, tree: u64, errs: &mut Vec<ProcessingError>) -> Vec<Snapshot> {
        let mut out = Vec::new();
        let load = |p: u64| self.node(p);
        let lower = |_: &[u8]| Ordering::Equal;
        let mut scan = Scan::new(&load, &lower, errs);
        let _ = scan.run(tree, &mut |k, v| {
            if let Some(s) = fstree::parse_snapshot(k, v) {
                out.push(s);
            }
            if out.len() >= 4096 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        out
    }

    /// Most bytes a file compressed inline (decmpfs types 3 and 7) is
    /// decoded to: its decoded bytes are held in its record
    /// ([`crate::Content::Resident`]), so larger ones are reported as
    /// [`crate::Content::Encoded`] with an [`ErrorKind::ContentEncoded`]
    /// error (resource forks are decoded as they are read, whatever their
    /// size). Default
    /// [`DEFAULT_DECODE_LIMIT`] (64 KiB); at most
    /// [`decmpfs::MAX_OUTPUT`] (16 MiB).
    pub fn set_decode_limit(&mut self, bytes: u64) {
        self.decode_limit = bytes.min(decmpfs::MAX_OUTPUT);
    }

    /// The volumes, in the container's order.
    pub fn volumes(&self) -> &[VolumeInfo] {
        &self.volumes
    }

    /// The container superblock of the checkpoint in use.
    pub fn superblock(&self) -> &NxSuperblock {
        &self.nx
    }

    /// Block of the checkpoint superblock in use.
    pub fn checkpoint_block(&self) -> u64 {
        self.nx_block
    }

    /// Bytes per block.
    pub fn block_size(&self) -> u64 {
        self.nx.block_size
    }

    /// Problems found when opening (rejected checkpoints, unreadable
    /// volumes, checksum mismatches).
    pub fn open_errors(&self) -> &[ProcessingError] {
        &self.open_errors
    }

    /// The source the container is read from.
    pub fn source(&self) -> &R {
        &self.src
    }

    fn block_offset(&self, b: u64) -> u64 {
        self.base
            .saturating_add(b.saturating_mul(self.nx.block_size))
    }

    /// Block `b`, cached; past the container or the source is an error.
    fn raw_block(&self, b: u64) -> Result<Arc<[u8]>, ProcessingError> {
        let at = self.block_offset(b);
        if b >= self.nx.block_count {
            return Err(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                at,
                format!(
                    "block {b} is outside the container's {} blocks",
                    self.nx.block_count
                ),
            ));
        }
        let bs = self.nx.block_size as usize;
        self.blocks
            .get(b, |_| {
                let mut v = vec![0u8; bs];
                let n = read_full(&self.src, &mut v, at)?;
                if n < bs {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("block {b} runs past the end of the source"),
                    ));
                }
                Ok(v)
            })
            .map_err(|e| ProcessingError::at(ErrorKind::Io, at, e.to_string()))
    }

    /// Object at block `b` of type `kind`: its checksum is checked (a
    /// mismatch reported once, the object still used) and its type must
    /// match.
    fn object(&self, b: u64, kind: u32) -> Result<Arc<[u8]>, ProcessingError> {
        let buf = self.raw_block(b)?;
        let at = self.block_offset(b);
        let h = ObjHeader::parse(&buf)
            .ok_or_else(|| ProcessingError::at(ErrorKind::CorruptFileSystem, at, "short object"))?;
        if !checksum_ok(&buf) {
            self.note_once(b, || ProcessingError::at(ErrorKind::ChecksumMismatch, at, format!("object {:#x} (type {:#x}) at block {b}: Fletcher-64 checksum mismatch (bytes 0-7 at offset {at})", h.oid, h.kind())));
        }
        if h.kind() != kind {
            return Err(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                at,
                format!(
                    "block {b} holds an object of type {:#x}, not {kind:#x}",
                    h.kind()
                ),
            ));
        }
        Ok(buf)
    }

    /// A B-tree node at physical block `b` (checksum checked as [`Self::object`]).
    fn node(&self, b: u64) -> Result<(Arc<[u8]>, u64), ProcessingError> {
        let buf = self.raw_block(b)?;
        let at = self.block_offset(b);
        if !checksum_ok(&buf) {
            let oid = crate::bytes::u64_at(&buf, 8).unwrap_or(0);
            self.note_once(b, || ProcessingError::at(ErrorKind::ChecksumMismatch, at, format!("B-tree node {oid:#x} at block {b}: Fletcher-64 checksum mismatch (bytes 0-7 at offset {at})")));
        }
        Ok((buf, at))
    }

    fn note_once(&self, b: u64, e: impl FnOnce() -> ProcessingError) {
        let mut p = self
            .noted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if p.1.len() < 1 << 16 && p.1.insert(b) {
            p.0.push(e());
        }
    }

    /// The problems noted after the first `from`, advancing `from` past
    /// them. A walk starts from [`Self::open_noted`]: it reports what it
    /// meets even when an earlier walk met it first.
    fn noted_since(&self, from: &mut usize) -> Vec<ProcessingError> {
        let p = self
            .noted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let out =
            p.0.get(*from..)
                .map(<[ProcessingError]>::to_vec)
                .unwrap_or_default();
        *from = p.0.len();
        out
    }

    /// The physical block of object `oid` at transaction `xid` in the
    /// object map whose B-tree root is at `tree` (the newest version not
    /// newer than `xid`; deleted ones are absent).
    fn omap_lookup(
        &self,
        tree: u64,
        oid: u64,
        xid: u64,
        errs: &mut Vec<ProcessingError>,
    ) -> Option<u64> {
        let load = |p: u64| self.node(p);
        let key = |k: &[u8]| -> Option<(u64, u64)> {
            Some((crate::bytes::u64_at(k, 0)?, crate::bytes::u64_at(k, 8)?))
        };
        let lower = |k: &[u8]| key(k).map_or(Ordering::Less, |(o, _)| o.cmp(&oid));
        let mut best: Option<(u64, u32, u64)> = None;
        let mut scan = Scan::new(&load, &lower, errs);
        let _ = scan.run(tree, &mut |k, v| {
            let Some((o, x)) = key(k) else {
                return ControlFlow::Continue(());
            };
            if o != oid {
                return ControlFlow::Break(());
            }
            if x <= xid && best.is_none_or(|b| x >= b.0) {
                let flags = crate::bytes::u32_at(v, 0).unwrap_or(0);
                let paddr = crate::bytes::u64_at(v, 8).unwrap_or(0);
                best = Some((x, flags, paddr));
            }
            ControlFlow::Continue(())
        });
        let (_, flags, paddr) = best?;
        if flags & 1 != 0 {
            return None;
        }
        if paddr == 0 || paddr >= self.nx.block_count {
            errs.push(ProcessingError::new(
                ErrorKind::CorruptFileSystem,
                format!("object map gives object {oid:#x} block {paddr}, outside the container"),
            ));
            return None;
        }
        Some(paddr)
    }

    /// Calls `f` with each run of free blocks as absolute extents, from the
    /// space manager's chunk bitmaps (TSK's rule: a chunk whose free count
    /// is its block count is free without reading its bitmap).
    pub fn unallocated_runs(&self, mut f: impl FnMut(Extent)) -> Result<(), FsError> {
        let bad = |why: String| FsError::not("APFS space manager", why);
        let sm_map = self
            .ephemeral
            .iter()
            .find(|m| m.oid == self.nx.spaceman_oid && m.kind == TYPE_SPACEMAN)
            .ok_or_else(|| {
                bad(format!(
                    "space manager {:#x} is not in the checkpoint map",
                    self.nx.spaceman_oid
                ))
            })?;
        let sm = self
            .object(sm_map.paddr, TYPE_SPACEMAN)
            .map_err(|e| bad(e.to_string()))?;
        let u32f = |b: &[u8], o| crate::bytes::u32_at(b, o).unwrap_or(0);
        let u64f = |b: &[u8], o| crate::bytes::u64_at(b, o).unwrap_or(0);
        // sm_dev[SD_MAIN]: block and chunk counts, then these.
        let cib_count = u32f(&sm, 48 + 16) as usize;
        let cab_count = u32f(&sm, 48 + 20) as usize;
        let addr_offset = u32f(&sm, 48 + 32) as usize;
        let top = if cab_count > 0 { cab_count } else { cib_count };
        let mut cibs = Vec::new();
        for i in 0..top.min(1 << 16) {
            let Some(a) = crate::bytes::u64_at(&sm, addr_offset + 8 * i) else {
                return Err(bad(format!(
                    "{top} chunk-info addresses do not fit the space manager"
                )));
            };
            if cab_count == 0 {
                cibs.push(a);
                continue;
            }
            let cab = self
                .object(a, TYPE_SPACEMAN_CAB)
                .map_err(|e| bad(e.to_string()))?;
            let n = u32f(&cab, 36) as usize;
            for j in 0..n.min(1 << 16) {
                match crate::bytes::u64_at(&cab, 40 + 8 * j) {
                    Some(c) => cibs.push(c),
                    None => {
                        return Err(bad(format!(
                            "{n} addresses do not fit the chunk-info address block at {a}"
                        )));
                    }
                }
            }
        }
        let mut chunks = Vec::new();
        for c in cibs {
            let cib = self
                .object(c, TYPE_SPACEMAN_CIB)
                .map_err(|e| bad(e.to_string()))?;
            let n = u32f(&cib, 36) as usize;
            for j in 0..n {
                let at = 40 + 32 * j;
                let Some(e) = crate::bytes::slice_at(&cib, at, 32) else {
                    return Err(bad(format!("{n} chunk infos do not fit block {c}")));
                };
                chunks.push((
                    u64f(e, 8),
                    u64::from(u32f(e, 16)),
                    u64::from(u32f(e, 20)),
                    u64f(e, 24),
                ));
            }
        }
        chunks.sort_by_key(|c| c.0);
        let bs = self.nx.block_size;
        let total = self.nx.block_count;
        let mut open: Option<(u64, u64)> = None;
        let mut emit = |start: u64, count: u64, f: &mut dyn FnMut(Extent)| {
            let end = start.saturating_add(count).min(total);
            if start >= end {
                return;
            }
            match open {
                Some((s, e)) if e == start => open = Some((s, end)),
                Some((s, e)) => {
                    f(Extent {
                        offset: self.block_offset(s),
                        len: (e - s).saturating_mul(bs),
                    });
                    open = Some((start, end));
                }
                None => open = Some((start, end)),
            }
        };
        for (addr, count, free, bitmap) in chunks {
            if free == 0 {
                continue;
            }
            if free >= count {
                emit(addr, count, &mut f);
                continue;
            }
            let bm = self.raw_block(bitmap).map_err(|e| bad(e.to_string()))?;
            let bits = count.min((<[u8]>::len(&bm) as u64).saturating_mul(8));
            let mut i = 0;
            while i < bits {
                let set = |i: u64| bm[(i / 8) as usize] >> (i % 8) & 1 == 1;
                if set(i) {
                    i += 1;
                    continue;
                }
                let s = i;
                while i < bits && !set(i) {
                    i += 1;
                }
                emit(addr.saturating_add(s), i - s, &mut f);
            }
        }
        if let Some((s, e)) = open {
            f(Extent {
                offset: self.block_offset(s),
                len: (e - s).saturating_mul(bs),
            });
        }
        Ok(())
    }

    /// Walks every unencrypted volume, calling `visit` once per name
    /// (see the module documentation for paths and numbering).
    pub fn walk<F>(&self, visit: F) -> Result<WalkSummary, FsError>
    where
        F: FnMut(FileRecord) -> ControlFlow<()>,
    {
        walk::walk(self, visit)
    }
}
