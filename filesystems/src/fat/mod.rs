//! FAT12/16/32, parsed here rather than with the `fatfs` crate: `fatfs` is
//! a read/write driver for live volumes; it hides deleted entries, raw
//! cluster extents, slack and broken chains, which are exactly what a
//! forensic walk must report.
//!
//! The walk follows The Sleuth Kit's FAT model so records line up with
//! `fls`/`icat` output: inode numbers derived from each entry's position,
//! entries recognised by TSK's validity tests (every slot is tested, not just
//! those before the first free slot), deleted directories entered when their
//! first cluster is unallocated, and deleted files recovered as TSK documents
//! (the unallocated clusters from the first one onwards, skipping allocated
//! ones, for the file size).

pub mod boot;
pub mod dir;
pub(crate) mod table;

use std::ops::ControlFlow;
use std::sync::Arc;

use crate::clusters::{DirGuard, Heap, chain_error, tsk_virtual_files, widen};
use crate::detect::FsKind;
use crate::error::{ErrorKind, FsError, ProcessingError};
use crate::name::hostile_reason;
use crate::read::{ReadAt, read_exact_at, read_full};
use crate::record::{Content, Extent, FileKind, FileRecord, MetaAddr, Recovery, TimeBase, Times};
use crate::walk::{Sink, WalkSummary};

use self::boot::BootSector;
use self::dir::{Dentry, Strictness, Verdict};
use self::table::{ChainStop, FatTable, Link, walk_chain};

/// Largest directory read: the FAT specification's limit of 65,536 entries.
const MAX_DIR_BYTES: u64 = 65_536 * 32;
/// Directories are read in chunks of this many bytes (rounded to sectors).
const DIR_CHUNK: u64 = 64 * 1024;
/// TSK's first inode number for directory entries (2 is the root).
const FIRST_NORMAL_INODE: u64 = 3;

/// An opened FAT12/16/32 file system.
pub struct FatFs<R> {
    src: R,
    /// Absolute offset of the volume on the source.
    base: u64,
    boot: BootSector,
    fat: FatTable,
    /// Last sector (volume-relative) present on the source, as TSK's
    /// `last_block_act`.
    last_sector: u64,
    open_errors: Vec<ProcessingError>,
}

impl<R: ReadAt> FatFs<R> {
    /// Opens the FAT file system whose boot sector is at byte `base` of
    /// `src`, in a volume of `len` bytes (the partition length).
    pub fn open(src: R, base: u64, len: u64) -> Result<Self, FsError> {
        let mut sector = [0u8; 512];
        read_exact_at(&src, &mut sector, base).map_err(|e| FsError::io(base, 512, e))?;
        let boot = BootSector::parse(&sector).map_err(|r| FsError::not("FAT boot sector", r))?;
        let bps = u64::from(boot.bytes_per_sector);
        let avail = len.min(src.len().saturating_sub(base));
        let mut open_errors = Vec::new();
        let present = avail / bps;
        if present < boot.total_sectors {
            open_errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                base,
                format!(
                    "boot sector claims {} sectors but only {present} are present",
                    boot.total_sectors
                ),
            ));
        }
        if boot.fat_too_small {
            open_errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                base,
                format!(
                    "FAT too small for the data area: cluster count limited to {}",
                    boot.cluster_count
                ),
            ));
        }
        let last_sector = boot.total_sectors.min(present).saturating_sub(1);
        // FAT32 may disable mirroring and name one active FAT (flags bit 7).
        let ext_flags = u16::from_le_bytes([sector[40], sector[41]]);
        let active = if boot.kind == FsKind::Fat32 && ext_flags & 0x80 != 0 {
            u64::from(ext_flags & 0x0f).min(u64::from(boot.fat_count) - 1)
        } else {
            0
        };
        let fat_bytes = boot.fat_sectors * bps;
        let fat_offset =
            base + (u64::from(boot.reserved_sectors) + active * boot.fat_sectors) * bps;
        let last_cluster = u32::try_from(boot.last_cluster()).unwrap_or(u32::MAX);
        let fat = FatTable::new(boot.kind, fat_offset, fat_bytes, last_cluster);
        Ok(Self {
            src,
            base,
            boot,
            fat,
            last_sector,
            open_errors,
        })
    }

    /// The validated boot sector.
    pub fn boot_sector(&self) -> &BootSector {
        &self.boot
    }

    /// FAT12, FAT16 or FAT32.
    pub fn kind(&self) -> FsKind {
        self.boot.kind
    }

    /// Problems found when opening (truncated volume, undersized FAT).
    pub fn open_errors(&self) -> &[ProcessingError] {
        &self.open_errors
    }

    /// The source the file system is read from.
    pub fn source(&self) -> &R {
        &self.src
    }

    fn bps(&self) -> u64 {
        u64::from(self.boot.bytes_per_sector)
    }

    fn cluster_size(&self) -> u64 {
        self.boot.cluster_size()
    }

    /// Volume-relative first sector of a cluster.
    fn cluster_sector(&self, c: u32) -> u64 {
        self.boot.first_cluster_sector
            + u64::from(c.saturating_sub(2)) * u64::from(self.boot.sectors_per_cluster)
    }

    /// Absolute offset of a cluster on the source.
    fn cluster_offset(&self, c: u32) -> u64 {
        self.base + self.cluster_sector(c) * self.bps()
    }

    /// The data area as the cluster helpers FAT and exFAT share see it.
    fn heap(&self) -> Heap {
        Heap {
            start: self.base + self.boot.first_cluster_sector * self.bps(),
            cluster_size: self.cluster_size(),
            end: self.base + (self.last_sector + 1) * self.bps(),
            last_cluster: u64::from(self.fat.last_cluster()),
        }
    }

    /// TSK inode number of entry `idx` in volume-relative sector `sector`.
    fn inode(&self, sector: u64, idx: u64) -> u64 {
        sector.saturating_sub(self.boot.first_data_sector) * (self.bps() / 32)
            + FIRST_NORMAL_INODE
            + idx
    }

    /// Bytes in the data area, the limit TSK puts on a file's size.
    fn data_bytes(&self) -> u64 {
        self.boot.cluster_count * self.cluster_size()
    }

    /// Calls `f` with each run of unallocated clusters, as absolute extents
    /// in disk order (the carving stage reads these), followed by the
    /// sectors after the last whole cluster, which no file can own (TSK's
    /// `blkls` lists them as unallocated too).
    pub fn unallocated_runs(&self, mut f: impl FnMut(Extent)) -> Result<(), FsError> {
        let cs = self.cluster_size();
        let end = self.base + (self.last_sector + 1) * self.bps();
        let tail = self.base
            + (self.boot.first_cluster_sector
                + self.boot.cluster_count * u64::from(self.boot.sectors_per_cluster))
                * self.bps();
        // The last free run is held back so the tail can be joined to it.
        let mut pending: Option<Extent> = None;
        self.fat
            .free_runs(&self.src, |first, count| {
                let offset = self.cluster_offset(first);
                let len = (u64::from(count) * cs).min(end.saturating_sub(offset));
                if len > 0
                    && let Some(p) = pending.replace(Extent { offset, len })
                {
                    f(p);
                }
            })
            .map_err(|e| FsError::io(self.fat_offset_for_errors(), 0, e))?;
        if tail < end {
            match pending.as_mut() {
                Some(p) if p.offset + p.len == tail => p.len += end - tail,
                _ => {
                    if let Some(p) = pending.take() {
                        f(p);
                    }
                    pending = Some(Extent {
                        offset: tail,
                        len: end - tail,
                    });
                }
            }
        }
        if let Some(p) = pending {
            f(p);
        }
        Ok(())
    }

    fn fat_offset_for_errors(&self) -> u64 {
        self.base + u64::from(self.boot.reserved_sectors) * self.bps()
    }

    /// Walks the whole file system depth-first, calling `visit` with one
    /// record per directory entry (and TSK's virtual files last). Returning
    /// `ControlFlow::Break` from `visit` stops the walk. Memory holds the
    /// directories on the current path only.
    pub fn walk<F>(&self, visit: F) -> Result<WalkSummary, FsError>
    where
        F: FnMut(FileRecord) -> ControlFlow<()>,
    {
        let mut w = Walker {
            fs: self,
            sink: Sink::new(visit, &self.open_errors),
            guard: DirGuard::new(self.boot.cluster_count + 1024),
        };
        let root: Arc<[String]> = Arc::from(Vec::new());
        let loc = if self.boot.kind == FsKind::Fat32 {
            DirLoc::Chain(self.boot.root_cluster)
        } else {
            DirLoc::FixedRoot
        };
        let mut flow = w.walk_dir(loc, &root, 0);
        if flow.is_continue() {
            flow = w.virtual_files(&root);
        }
        Ok(w.sink.finish(flow))
    }
}

/// Where a directory's entries are.
#[derive(Clone, Copy, Debug)]
enum DirLoc {
    /// The FAT12/16 root directory region.
    FixedRoot,
    /// An allocated directory: its cluster chain.
    Chain(u32),
    /// A deleted directory: its first cluster only (as TSK reads them).
    Deleted(u32),
}

struct Walker<'a, R, F> {
    fs: &'a FatFs<R>,
    sink: Sink<F>,
    /// Loops, depth and the directory budget.
    guard: DirGuard,
}

/// Long-name pieces met so far, waiting for their short entry.
#[derive(Default)]
struct LfnRun {
    checksum: u8,
    deleted: bool,
    /// Pieces in on-disk order (last name piece first).
    pieces: Vec<[u16; 13]>,
    /// Ordinal the next (allocated) piece must have; 0 once complete.
    next_ordinal: u8,
    broken: bool,
    offset: u64,
}

impl<R: ReadAt, F: FnMut(FileRecord) -> ControlFlow<()>> Walker<'_, R, F> {
    fn error(&mut self, e: ProcessingError) {
        self.sink.error(e);
    }

    fn emit(&mut self, rec: FileRecord) -> ControlFlow<()> {
        self.sink.emit(rec)
    }

    /// Where a directory's entries are: runs of sectors `(first, count)`
    /// and whether those sectors are allocated.
    fn dir_segments(&mut self, loc: DirLoc) -> (Vec<(u64, u64)>, bool) {
        let fs = self.fs;
        match loc {
            DirLoc::FixedRoot => {
                let first = fs.boot.first_data_sector;
                let n = fs.boot.first_cluster_sector - first;
                (vec![(first, n)], true)
            }
            DirLoc::Chain(start) => {
                let max = (MAX_DIR_BYTES / fs.cluster_size()).max(1);
                let chain = walk_chain(&fs.fat, &fs.src, start, max);
                let spc = u64::from(fs.boot.sectors_per_cluster);
                let at = fs.cluster_offset(start);
                match chain.stop {
                    ChainStop::Eof => {}
                    ChainStop::Enough => self.error(ProcessingError::at(
                        ErrorKind::WalkLimit,
                        at,
                        "directory larger than 65,536 entries; the rest is not read",
                    )),
                    ref other => self.error(chain_error(
                        at,
                        other,
                        u64::from(fs.fat.last_cluster()),
                        "directory",
                    )),
                }
                let segments = chain
                    .runs
                    .iter()
                    .map(|&(c, n)| (fs.cluster_sector(c), u64::from(n) * spc))
                    .collect();
                (segments, true)
            }
            DirLoc::Deleted(c) => (
                vec![(fs.cluster_sector(c), u64::from(fs.boot.sectors_per_cluster))],
                false,
            ),
        }
    }

    /// Walks one directory: emits a record per entry and descends into
    /// subdirectories right after emitting them (TSK's order). The
    /// directory is read in chunks of at most [`DIR_CHUNK`] bytes, so each
    /// level of the tree holds one chunk whatever the directory's size.
    fn walk_dir(&mut self, loc: DirLoc, path: &Arc<[String]>, depth: usize) -> ControlFlow<()> {
        let fs = self.fs;
        let (segments, allocated) = self.dir_segments(loc);
        let bps = fs.bps();
        let bps_usize = usize::try_from(bps).unwrap_or(512);
        let per_sector = bps_usize / 32;
        let chunk_sectors = (DIR_CHUNK / bps).max(1);
        let fat32 = fs.boot.kind == FsKind::Fat32;
        let last = fs.fat.last_cluster();
        let data_bytes = fs.data_bytes();
        let mut lfn = LfnRun::default();
        let mut seen = 0u32;
        let mut invalid = 0u32;
        let mut corrupt_dir = false;
        let mut buf = Vec::new();
        for (first, count) in segments {
            let count = count.min((fs.last_sector + 1).saturating_sub(first));
            let mut sector0 = first;
            while sector0 < first + count {
                let n = chunk_sectors.min(first + count - sector0);
                buf.clear();
                buf.resize(usize::try_from(n * bps).unwrap_or(0), 0);
                let at = fs.base + sector0 * bps;
                match read_full(&fs.src, &mut buf, at) {
                    Ok(got) if got < buf.len() => self.error(ProcessingError::at(
                        ErrorKind::Io,
                        at + got as u64,
                        "directory runs past the end of the source",
                    )),
                    Ok(_) => {}
                    Err(e) => self.error(ProcessingError::at(ErrorKind::Io, at, e.to_string())),
                }
                for (si, slot_bytes) in buf.chunks_exact(bps_usize).enumerate() {
                    let sector = sector0 + si as u64;
                    for (idx, slot) in slot_bytes.chunks_exact(32).take(per_sector).enumerate() {
                        let Ok(slot) = <&[u8; 32]>::try_from(slot) else {
                            break;
                        };
                        let d = Dentry(slot);
                        let abs = fs.base + sector * bps + (idx as u64) * 32;
                        seen += 1;
                        let strict = if allocated && !corrupt_dir {
                            Strictness::Basic
                        } else {
                            Strictness::Full
                        };
                        let verdict = dir::test_dentry(&d, strict, fat32, last, data_bytes, |v| {
                            fs.fat.is_eof_value(v)
                        });
                        if verdict == Verdict::Invalid {
                            invalid += 1;
                            // TSK: four invalid entries first means this is
                            // probably not a directory; test the rest in depth.
                            if seen == 4 && invalid == 4 {
                                corrupt_dir = true;
                            }
                            continue;
                        }
                        if d.is_lfn() {
                            self.lfn_piece(&mut lfn, &d, abs);
                            continue;
                        }
                        let pending = std::mem::take(&mut lfn);
                        if d.is_dot() {
                            self.orphan_lfn(&pending);
                            continue;
                        }
                        let inode = fs.inode(sector, idx as u64);
                        let rec =
                            self.entry_record(&d, pending, verdict, allocated, inode, abs, path);
                        let is_dir = rec.kind == FileKind::Directory;
                        let name = rec.name.clone();
                        let live = rec.allocated;
                        self.emit(rec)?;
                        if is_dir {
                            self.descend(&d, live, name, path, depth, abs)?;
                        }
                    }
                }
                sector0 += n;
            }
        }
        self.orphan_lfn(&lfn);
        ControlFlow::Continue(())
    }

    fn lfn_piece(&mut self, lfn: &mut LfnRun, d: &Dentry<'_>, abs: u64) {
        let seq = d.lfn_seq();
        let chk = d.lfn_checksum();
        let deleted = seq == dir::SLOT_DELETED;
        let starts = !deleted && seq & 0x40 != 0;
        let continues = !lfn.pieces.is_empty()
            && lfn.checksum == chk
            && lfn.deleted == deleted
            && (deleted || (!starts && seq & 0x3f == lfn.next_ordinal));
        if !continues {
            let old = std::mem::take(lfn);
            self.orphan_lfn(&old);
            lfn.checksum = chk;
            lfn.deleted = deleted;
            lfn.offset = abs;
            lfn.broken = !deleted && !starts;
        }
        if !deleted {
            lfn.next_ordinal = (seq & 0x3f).saturating_sub(1);
        }
        lfn.pieces.push(d.lfn_units());
    }

    /// Reports allocated long-name pieces that no short entry claimed.
    fn orphan_lfn(&mut self, lfn: &LfnRun) {
        if !lfn.pieces.is_empty() && !lfn.deleted {
            self.error(ProcessingError::at(
                ErrorKind::LongName,
                lfn.offset,
                format!(
                    "{} orphan long-name piece(s) (checksum {:#04x}) not followed by their short entry",
                    lfn.pieces.len(),
                    lfn.checksum
                ),
            ));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn entry_record(
        &mut self,
        d: &Dentry<'_>,
        lfn: LfnRun,
        verdict: Verdict,
        sector_allocated: bool,
        inode: u64,
        abs: u64,
        path: &Arc<[String]>,
    ) -> FileRecord {
        let fs = self.fs;
        let mut errors = Vec::new();
        if let Verdict::Suspect(why) = verdict {
            errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                abs,
                format!("damaged directory entry kept: {why}"),
            ));
        }
        let attr = d.attr();
        let kind = if attr & dir::ATTR_VOLUME != 0 {
            FileKind::VolumeLabel
        } else if attr & dir::ATTR_DIRECTORY != 0 {
            FileKind::Directory
        } else {
            FileKind::File
        };
        let allocated = sector_allocated && !d.is_deleted();
        let (name, raw_name, short_name) = if kind == FileKind::VolumeLabel {
            self.orphan_lfn(&lfn);
            (dir::label_name(d), d.name_bytes().to_vec(), None)
        } else {
            let short = dir::short_name(d);
            match self.long_name(&lfn, d, &mut errors) {
                Some((long, raw)) => (long, raw, Some(short)),
                None => (short, d.name_bytes().to_vec(), None),
            }
        };
        if let Some(why) = hostile_reason(&name) {
            errors.push(ProcessingError::at(ErrorKind::HostileName, abs, why));
        }
        let (modified, accessed, created) = d.times();
        let times = Times {
            modified,
            accessed,
            changed: None,
            created,
        };
        let fat32 = fs.boot.kind == FsKind::Fat32;
        let start = d.cluster(fat32);
        let (size, content, slack, recovery) = match kind {
            FileKind::Directory => self.dir_content(start, allocated, abs, &mut errors),
            _ => self.file_content(start, u64::from(d.size()), allocated, abs, &mut errors),
        };
        FileRecord {
            parent: path.clone(),
            name,
            raw_name,
            short_name,
            stream: None,
            meta: MetaAddr { inode, attr: None },
            kind,
            size,
            times,
            name_times: None,
            time_base: TimeBase::LocalWallClock,
            allocated,
            attributes: u32::from(attr),
            owner: crate::record::Owner::fat(attr & dir::ATTR_READ_ONLY != 0),
            content,
            slack,
            recovery,
            errors,
        }
    }

    /// The long name for a short entry from the pieces before it, if they
    /// belong to it.
    fn long_name(
        &mut self,
        lfn: &LfnRun,
        d: &Dentry<'_>,
        errors: &mut Vec<ProcessingError>,
    ) -> Option<(String, Vec<u8>)> {
        if lfn.pieces.is_empty() {
            return None;
        }
        if lfn.deleted != d.is_deleted() {
            self.orphan_lfn(lfn);
            return None;
        }
        let mut pieces = lfn.pieces.clone();
        pieces.reverse();
        let assembled = dir::assemble_long_name(&pieces);
        if !lfn.deleted {
            let sum = dir::lfn_checksum(d.name_bytes());
            if lfn.broken || lfn.next_ordinal != 0 || sum != lfn.checksum {
                errors.push(ProcessingError::at(
                    ErrorKind::LongName,
                    lfn.offset,
                    format!(
                        "long name `{}` does not belong to this entry (checksum {:#04x}, entry's {:#04x}{}); short name used",
                        crate::name::escape_component(&assembled.name),
                        lfn.checksum,
                        sum,
                        if lfn.broken || lfn.next_ordinal != 0 {
                            ", sequence incomplete"
                        } else {
                            ""
                        }
                    ),
                ));
                return None;
            }
        } else {
            // A deleted entry lost its first byte, so the checksum can only
            // be checked against the first character the long name implies.
            let mut short = [0u8; 11];
            short.copy_from_slice(d.name_bytes());
            let first = assembled
                .name
                .chars()
                .find(|c| *c != '.' && *c != ' ')
                .filter(char::is_ascii)
                .map(|c| c.to_ascii_uppercase() as u8);
            let verified = first.is_some_and(|f| {
                short[0] = f;
                dir::lfn_checksum(&short) == lfn.checksum
            });
            if !verified {
                errors.push(ProcessingError::at(
                    ErrorKind::LongName,
                    lfn.offset,
                    "deleted long name kept without a verifiable checksum (the entry's first byte is lost)",
                ));
            }
        }
        if pieces.len() > 20 {
            errors.push(ProcessingError::at(
                ErrorKind::LongName,
                lfn.offset,
                format!("long name spans {} pieces (limit 20)", pieces.len()),
            ));
        }
        for p in assembled.problems {
            errors.push(ProcessingError::at(ErrorKind::NameEncoding, lfn.offset, p));
        }
        Some((assembled.name, assembled.raw))
    }

    /// Size, content and recovery of a directory entry, as TSK computes them:
    /// allocated directories span their chain; a deleted one is one cluster
    /// if that cluster is free, else empty.
    fn dir_content(
        &mut self,
        start: u32,
        allocated: bool,
        abs: u64,
        errors: &mut Vec<ProcessingError>,
    ) -> (u64, Content, Vec<Extent>, Recovery) {
        let fs = self.fs;
        let cs = fs.cluster_size();
        let last = fs.fat.last_cluster();
        if start < 2 || start > last {
            if start != 0 || allocated {
                errors.push(ProcessingError::at(
                    ErrorKind::ChainOutOfRange,
                    abs,
                    format!("directory start cluster {start} is outside 2..={last}"),
                ));
            }
            return (
                0,
                Content::None,
                Vec::new(),
                live_or(allocated, Recovery::Unrecoverable),
            );
        }
        if allocated {
            let max = (MAX_DIR_BYTES / cs).max(1);
            let chain = walk_chain(&fs.fat, &fs.src, start, max);
            let runs = fs.heap().runs(&widen(&chain.runs), u64::MAX);
            let size = chain.clusters() * cs;
            (size, Content::Runs(runs), Vec::new(), Recovery::Allocated)
        } else {
            match fs.fat.is_allocated(&fs.src, start) {
                Ok(false) => {
                    let runs = fs.heap().runs(&[(u64::from(start), 1)], u64::MAX);
                    (cs, Content::Runs(runs), Vec::new(), Recovery::Unallocated)
                }
                Ok(true) => (0, Content::None, Vec::new(), Recovery::Overwritten),
                Err(e) => {
                    errors.push(ProcessingError::at(ErrorKind::Io, abs, e.to_string()));
                    (0, Content::None, Vec::new(), Recovery::Unrecoverable)
                }
            }
        }
    }

    /// Content of a file or label entry of `size` bytes starting at `start`.
    fn file_content(
        &mut self,
        start: u32,
        size: u64,
        allocated: bool,
        abs: u64,
        errors: &mut Vec<ProcessingError>,
    ) -> (u64, Content, Vec<Extent>, Recovery) {
        let fs = self.fs;
        let cs = fs.cluster_size();
        let last = fs.fat.last_cluster();
        if size > fs.data_bytes() {
            errors.push(ProcessingError::at(
                ErrorKind::AbsurdSize,
                abs,
                format!(
                    "size {size} exceeds the {} bytes of the data area",
                    fs.data_bytes()
                ),
            ));
        }
        if size == 0 {
            return (
                0,
                Content::None,
                Vec::new(),
                live_or(allocated, Recovery::Unallocated),
            );
        }
        if start < 2 || start > last {
            errors.push(ProcessingError::at(
                ErrorKind::ChainOutOfRange,
                abs,
                format!("start cluster {start} is outside 2..={last} for a {size}-byte file"),
            ));
            return (
                size,
                Content::None,
                Vec::new(),
                live_or(allocated, Recovery::Unrecoverable),
            );
        }
        let needed = size.div_ceil(cs).min(fs.boot.cluster_count);
        let (clusters, recovery) = if allocated {
            let chain = walk_chain(&fs.fat, &fs.src, start, needed);
            match &chain.stop {
                ChainStop::Enough => {}
                ChainStop::Eof => errors.push(ProcessingError::at(
                    ErrorKind::ChainTooShort,
                    abs,
                    format!(
                        "cluster chain ends after {} of the {needed} clusters the size needs",
                        chain.clusters()
                    ),
                )),
                other => errors.push(chain_error(
                    fs.cluster_offset(start),
                    other,
                    u64::from(last),
                    "file",
                )),
            }
            (widen(&chain.runs), Recovery::Allocated)
        } else {
            let mut fat = fs.fat.cursor(&fs.src);
            // FAT walks have no recovery budget, as before exFAT's.
            let mut unlimited = u64::MAX;
            fs.heap().recover(
                u64::from(start),
                needed,
                abs,
                &mut unlimited,
                |c| fat.is_allocated(u32::try_from(c).unwrap_or(u32::MAX)),
                errors,
            )
        };
        let heap = fs.heap();
        let runs = heap.runs(&clusters, size);
        let slack = heap.slack(&clusters, size);
        (size, Content::Runs(runs), slack, recovery)
    }

    /// Walks into the subdirectory a just-emitted entry names.
    fn descend(
        &mut self,
        d: &Dentry<'_>,
        allocated: bool,
        name: String,
        path: &Arc<[String]>,
        depth: usize,
        abs: u64,
    ) -> ControlFlow<()> {
        let fs = self.fs;
        let start = d.cluster(fs.boot.kind == FsKind::Fat32);
        if start < 2 || start > fs.fat.last_cluster() {
            return ControlFlow::Continue(());
        }
        let loc = if allocated {
            DirLoc::Chain(start)
        } else {
            // TSK reads a deleted directory only if its first cluster is
            // still unallocated.
            match fs.fat.link(&fs.src, start) {
                Ok(Link::Free) => DirLoc::Deleted(start),
                _ => return ControlFlow::Continue(()),
            }
        };
        let root_cluster = (fs.boot.kind == FsKind::Fat32).then_some(fs.boot.root_cluster);
        if let Err(e) = self.guard.enter(
            u64::from(start),
            allocated,
            root_cluster == Some(start),
            depth,
            &name,
            abs,
        ) {
            self.error(e);
            return ControlFlow::Continue(());
        }
        let mut child: Vec<String> = path.to_vec();
        child.push(name);
        let child: Arc<[String]> = Arc::from(child);
        let flow = self.walk_dir(loc, &child, depth + 1);
        self.guard.leave();
        flow
    }

    /// TSK's virtual files: `$MBR`, `$FAT1`.., `$OrphanFiles`, numbered after
    /// the last directory-entry inode.
    fn virtual_files(&mut self, root: &Arc<[String]>) -> ControlFlow<()> {
        let fs = self.fs;
        let bps = fs.bps();
        let nfat = u64::from(fs.boot.fat_count.min(2));
        let mbr = fs.inode(fs.last_sector + 1, 0);
        let fats: Vec<(u64, u64)> = (0..nfat)
            .map(|i| {
                (
                    fs.base + (u64::from(fs.boot.reserved_sectors) + i * fs.boot.fat_sectors) * bps,
                    fs.boot.fat_sectors * bps,
                )
            })
            .collect();
        for rec in tsk_virtual_files(root, mbr, fs.base, &fats) {
            self.emit(rec)?;
        }
        ControlFlow::Continue(())
    }
}

/// `Allocated` for a live entry, else the given state of a deleted one.
fn live_or(allocated: bool, deleted: Recovery) -> Recovery {
    if allocated {
        Recovery::Allocated
    } else {
        deleted
    }
}
