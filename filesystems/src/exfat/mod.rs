//! exFAT, parsed here rather than with a crate: the exFAT crates on
//! crates.io (`exfat`, `exfat-fs`, `hadris-fat`, `embedded-exfat`,
//! `lamexfat`) are drivers and boot loaders that list live files only and
//! hide cluster extents; the one forensic reader (`fat-core`, 0.1.x) lists
//! deleted entries but not as The Sleuth Kit numbers, recovers and finds
//! them (positional inode numbers, recovery through the allocation bitmap,
//! orphan entries in free clusters), nor through this crate's bounded
//! positioned reads. Those are what a walk here must give, so that records
//! line up with `fls`/`icat`.
//!
//! # The model (TSK 4.11.1's `exfatfs`)
//!
//! - Inode numbers come from each entry's position, counted in 32-byte
//!   entries from the start of the cluster heap plus 3 (the root is 2), as
//!   on FAT; an entry set is numbered by its File entry.
//! - A directory is read whole (through its FAT chain, or contiguously
//!   when its stream says `NoFatChain`) and every 32-byte slot is tested:
//!   File (0x85/0x05), Stream Extension (0xC0/0x40) and File Name
//!   (0xC1/0x41) entries build a name, which is listed when its set is
//!   complete or the next entry breaks it; a set is deleted when its File
//!   entry's `InUse` bit is clear or its sector lies in a free cluster.
//!   The volume label is listed as `label (Volume Label Entry)` (an empty
//!   one as `$EMPTY_VOLUME_LABEL`), the allocation bitmap and up-case table
//!   as `$ALLOC_BITMAP` and `$UPCASE_TABLE`, a volume GUID and TexFAT entry
//!   as `$VOLUME_GUID` and `$TEX_FAT`; `$MBR`, `$FAT1` (`$FAT2`) and
//!   `$OrphanFiles` follow the tree.
//! - Size, times and content come from the File entry and the Stream entry
//!   found as TSK finds it (the next slot, or the first slot of the next
//!   cluster in the FAT when the File entry ends an allocated cluster).
//! - Deleted files and directories are recovered as TSK recovers them: from
//!   the first cluster on, the free clusters (by the allocation bitmap)
//!   until the size is covered, skipping allocated ones; if the first
//!   cluster is allocated the content is overwritten (that one cluster is
//!   shown). The FAT is not consulted for deleted files.
//! - Orphans: File entries in free clusters (and in the sectors after the
//!   heap) that no directory reached are listed under `$OrphanFiles`, named
//!   from their own name entries or `OrphanFile-<inode>`; deleted
//!   directories among them are walked, and what they hold is listed under
//!   them rather than again at the top. This reads every free cluster once
//!   (as `fls` does); [`ExfatFs::set_orphan_search`] turns it off.
//!
//! # Deliberate differences from TSK
//!
//! - Times: when all three UTC-offset fields of a File entry are valid, the
//!   times are converted to UTC with them ([`crate::TimeBase::Utc`]); TSK ignores
//!   the offsets and shows the writer's wall clock. Offsets of zero (what
//!   Linux and macOS write) give TSK's numbers exactly; entries with any
//!   offset missing keep the wall clock ([`crate::TimeBase::LocalWallClock`]).
//! - Dates after 2037 are kept; TSK caps the year before `mktime` and
//!   shows them as 0.
//! - Bytes past a stream's `ValidDataLength` read as zeros (as Windows
//!   returns them and as this crate reads NTFS past its initialized size);
//!   TSK 4.11.1 ignores `ValidDataLength` and returns the stored bytes.
//! - Checks TSK does not make are made and reported, never fatal: the boot
//!   region checksum, each entry set's `SetChecksum`, the name hash against
//!   the up-case table, the up-case table's checksum, name lengths that run
//!   past their name entries, sets cut short, chains that loop or leave the
//!   heap (the part before the fault is kept; TSK drops a looping chain's
//!   content).
//! - A deleted directory whose first cluster is allocated again is not
//!   entered (TSK parses the reused cluster if the directory fits in one);
//!   as on FAT, its clusters belong to something else now.
//! - Names are kept verbatim up to their first NUL unit, where TSK's end
//!   too (units after it are reported; `fls` shows control characters as
//!   `^`); an orphan's name longer than 127 units is given whole (TSK's
//!   8-bit byte counter wraps and garbles it).
//! - Names of sets without a name entry are not listed (as TSK) but are
//!   reported as a walk error when the set is live.
//! - The access-control-table entry (0xE2), which TSK 4.11.1 tests as a
//!   TexFAT entry and so never lists, is not listed either.
//! - The allocation bitmap, up-case table and label are looked for in the
//!   first MiB of the root directory (TSK searches the heap sector by
//!   sector for the bitmap). A volume without a bitmap still opens, with
//!   every cluster counted as allocated and an error recorded (TSK refuses
//!   it); without an up-case table, names are hashed with Unicode's simple
//!   upper case.
//! - Work is bounded whatever the input: directories are read at most 256
//!   MiB each and four times the heap in all, recovery looks at most at 16
//!   clusters per heap cluster in all, and at most 2^20 inode numbers are
//!   remembered for the orphan search (limits reached are reported).

pub(crate) mod bitmap;
pub mod boot;
pub mod entry;
pub mod upcase;
mod walk;

use std::io;
use std::ops::ControlFlow;

use crate::clusters::{Heap, chain_error};
use crate::detect::FsKind;
use crate::error::{ErrorKind, FsError, ProcessingError};
use crate::fat::table::{ChainStop, FatTable, Link, walk_chain};
use crate::read::{ReadAt, read_exact_at, read_full};
use crate::record::{Content, Extent, FileRecord, Recovery, Run, clip_runs, push_run};
use crate::walk::WalkSummary;

use self::bitmap::Bitmap;
use self::boot::{ExfatBoot, check_boot_region};
use self::entry::{Entry, Limits, UnitState};
use self::upcase::{MAX_TABLE_BYTES, Upcase, table_checksum};

/// TSK's first inode number for directory entries (2 is the root).
const FIRST_NORMAL_INODE: u64 = 3;
/// How much of the root directory is searched for the allocation bitmap,
/// up-case table and label entries when opening (they come first).
const ROOT_SCAN_BYTES: u64 = 1024 * 1024;
/// ... read in chunks of this many bytes.
const ROOT_SCAN_CHUNK: u64 = 64 * 1024;

/// An opened exFAT file system.
pub struct ExfatFs<R> {
    src: R,
    /// Absolute offset of the volume on the source.
    base: u64,
    boot: ExfatBoot,
    fat: FatTable,
    bitmap: Bitmap,
    /// The allocation bitmap in use: (first cluster, length in bytes).
    bitmap_at: Option<(u32, u64)>,
    upcase: Upcase,
    label: Option<String>,
    /// Last sector (volume-relative) present on the source, as TSK's
    /// `last_block_act`.
    last_sector: u64,
    open_errors: Vec<ProcessingError>,
    find_orphans: bool,
}

impl<R: ReadAt> ExfatFs<R> {
    /// Opens the exFAT file system whose boot sector is at byte `base` of
    /// `src`, in a volume of `len` bytes (the partition length). Only a
    /// boot sector that cannot describe a volume is an error; damage found
    /// beyond it is in [`ExfatFs::open_errors`].
    pub fn open(src: R, base: u64, len: u64) -> Result<Self, FsError> {
        let mut sector = [0u8; 512];
        read_exact_at(&src, &mut sector, base).map_err(|e| FsError::io(base, 512, e))?;
        let boot = ExfatBoot::parse(&sector).map_err(|r| FsError::not("exFAT boot sector", r))?;
        let bps = u64::from(boot.bytes_per_sector);
        let mut open_errors = Vec::new();
        let avail = len.min(src.len().saturating_sub(base));
        let present = avail / bps;
        if present < boot.volume_sectors {
            open_errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                base,
                format!(
                    "boot sector claims {} sectors but only {present} are present",
                    boot.volume_sectors
                ),
            ));
        }
        let last_sector = boot.volume_sectors.min(present).saturating_sub(1);
        check_boot_regions(&src, base, &boot, &mut open_errors);
        if !boot.signature_ok {
            open_errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                base + 510,
                "boot sector does not end with the 0x55 0xAA signature",
            ));
        }
        let fat_bytes = boot.fat_sectors * bps;
        if fat_bytes / 4 < boot.cluster_count + 2 {
            open_errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                base + boot.fat_offset * bps,
                format!(
                    "FAT of {fat_bytes} bytes cannot map {} clusters: chains past it read as free",
                    boot.cluster_count
                ),
            ));
        }
        // TSK reads FAT 0 whatever `ActiveFat` says (TexFAT's second FAT is
        // never in use on volumes seen in practice).
        let last_cluster = u32::try_from(boot.last_cluster()).unwrap_or(u32::MAX);
        let fat = FatTable::new(
            FsKind::ExFat,
            base + boot.fat_offset * bps,
            fat_bytes,
            last_cluster,
        );
        let mut fs = Self {
            src,
            base,
            boot,
            fat,
            bitmap: Bitmap::new(None, 0),
            bitmap_at: None,
            upcase: Upcase::fallback(),
            label: None,
            last_sector,
            open_errors,
            find_orphans: true,
        };
        fs.read_root_metadata();
        Ok(fs)
    }

    /// Finds the allocation bitmap, up-case table and volume label entries
    /// at the start of the root directory, as TSK does when opening.
    fn read_root_metadata(&mut self) {
        let cs = self.cluster_size();
        let max = ROOT_SCAN_BYTES.div_ceil(cs).max(1);
        let chain = walk_chain(&self.fat, &self.src, self.boot.root_cluster, max);
        let limits = self.limits();
        let clusters: Vec<(u64, u64)> = chain
            .runs
            .iter()
            .map(|&(c, n)| (u64::from(c), u64::from(n)))
            .collect();
        let runs = self.heap().runs(&clusters, ROOT_SCAN_BYTES);
        let mut upcase: Option<(u32, u64, u32, u64)> = None;
        let mut buf = Vec::new();
        'scan: for run in &runs {
            let Run::Data { offset, len } = *run else {
                continue;
            };
            let mut pos = 0;
            while pos < len {
                let n = ROOT_SCAN_CHUNK.min(len - pos);
                let at = offset + pos;
                buf.clear();
                buf.resize(usize::try_from(n).unwrap_or(0), 0);
                let Ok(got) = read_full(&self.src, &mut buf, at) else {
                    break 'scan;
                };
                for (i, slot) in buf[..got].chunks_exact(32).enumerate() {
                    let Some(e) = Entry::at(slot) else { break };
                    let no_bitmap = |_| None;
                    if !entry::is_entry(&e, UnitState::Allocated, &limits, &no_bitmap) {
                        continue;
                    }
                    let abs = at + 32 * i as u64;
                    match e.kind() {
                        entry::TYPE_ALLOC_BITMAP if self.bitmap_at.is_none() => {
                            let first = self.boot.cluster_sector(u64::from(e.first_cluster()));
                            let last = first
                                + e.data_length()
                                    .div_ceil(u64::from(self.boot.bytes_per_sector));
                            if first >= self.boot.heap_offset && last <= self.boot.heap_end() {
                                self.bitmap_at = Some((e.first_cluster(), e.data_length()));
                            }
                        }
                        entry::TYPE_UPCASE if upcase.is_none() => {
                            upcase =
                                Some((e.first_cluster(), e.data_length(), e.table_checksum(), abs));
                        }
                        entry::TYPE_LABEL if self.label.is_none() && e.in_use() => {
                            let units = e.label_units(usize::from(e.label_length()));
                            let end = units.iter().position(|&u| u == 0).unwrap_or(units.len());
                            self.label = Some(crate::bytes::decode_utf16(&units[..end]).0);
                        }
                        _ => {}
                    }
                }
                if got < buf.len()
                    || (self.bitmap_at.is_some() && upcase.is_some() && self.label.is_some())
                {
                    break 'scan;
                }
                pos += n;
            }
        }
        let root_at = self.cluster_offset(u64::from(self.boot.root_cluster));
        match self.bitmap_at {
            Some((c, _)) => {
                self.bitmap = Bitmap::new(Some(self.cluster_offset(u64::from(c))), self.boot.cluster_count);
            }
            None => self.open_errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                root_at,
                "no allocation bitmap entry in the root directory: every cluster is treated as allocated (nothing is recovered or offered as free)",
            )),
        }
        match upcase {
            Some((c, len, stored, abs)) => self.load_upcase(c, len, stored, abs),
            None => self.open_errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                root_at,
                "no up-case table entry in the root directory: name hashes are checked with Unicode's simple upper case",
            )),
        }
    }

    fn load_upcase(&mut self, cluster: u32, len: u64, stored: u32, abs: u64) {
        if len > MAX_TABLE_BYTES {
            self.open_errors.push(ProcessingError::at(
                ErrorKind::AbsurdSize,
                abs,
                format!("up-case table of {len} bytes is larger than the {MAX_TABLE_BYTES} any table needs: only the start is read"),
            ));
        }
        let mut buf = vec![0u8; usize::try_from(len.min(MAX_TABLE_BYTES)).unwrap_or(0)];
        let at = self.cluster_offset(u64::from(cluster));
        match read_full(&self.src, &mut buf, at) {
            Ok(n) if n == buf.len() => {}
            Ok(n) => {
                buf.truncate(n);
                self.open_errors.push(ProcessingError::at(
                    ErrorKind::Io,
                    at + n as u64,
                    "up-case table runs past the end of the source",
                ));
            }
            Err(e) => {
                self.open_errors
                    .push(ProcessingError::at(ErrorKind::Io, at, e.to_string()));
                return;
            }
        }
        let sum = table_checksum(&buf);
        if len <= MAX_TABLE_BYTES && sum != stored {
            self.open_errors.push(ProcessingError::at(
                ErrorKind::ChecksumMismatch,
                abs,
                format!(
                    "up-case table checksum {sum:#010x} does not match the stored {stored:#010x}: the table is used anyway"
                ),
            ));
        }
        self.upcase = Upcase::decode(&buf);
    }

    /// Whether the walk searches free clusters for orphan entries (on by
    /// default, as `fls` does). It reads every free cluster once; off, the
    /// walk reads only directories and `$OrphanFiles` is empty, as this
    /// crate's FAT walk leaves it.
    pub fn set_orphan_search(&mut self, on: bool) {
        self.find_orphans = on;
    }

    /// The validated boot sector.
    pub fn boot_sector(&self) -> &ExfatBoot {
        &self.boot
    }

    /// The volume label from the root directory, if there is one.
    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// The volume's up-case table (Unicode's simple upper case where the
    /// volume's own could not be read), for comparing names as exFAT does.
    pub fn upcase(&self) -> &Upcase {
        &self.upcase
    }

    /// Always [`FsKind::ExFat`].
    pub fn kind(&self) -> FsKind {
        FsKind::ExFat
    }

    /// Problems found when opening (truncated volume, boot region checksum,
    /// missing or damaged allocation bitmap or up-case table).
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

    /// Absolute offset of a cluster on the source.
    fn cluster_offset(&self, c: u64) -> u64 {
        self.base + self.boot.cluster_sector(c) * self.bps()
    }

    /// Absolute end of the bytes the volume has on the source.
    fn end(&self) -> u64 {
        self.base + (self.last_sector + 1) * self.bps()
    }

    /// The cluster heap as the helpers FAT and exFAT share see it.
    fn heap(&self) -> Heap {
        Heap {
            start: self.cluster_offset(2),
            cluster_size: self.cluster_size(),
            end: self.end(),
            last_cluster: self.boot.last_cluster(),
        }
    }

    fn limits(&self) -> Limits {
        Limits {
            cluster_count: self.boot.cluster_count,
            heap_bytes: self.boot.cluster_count * self.cluster_size(),
        }
    }

    /// Entries per sector.
    fn per_sector(&self) -> u64 {
        self.bps() / 32
    }

    /// TSK inode number of the entry at absolute byte `abs`.
    fn inode_at(&self, abs: u64) -> u64 {
        let rel = abs.saturating_sub(self.base);
        let sector = rel / self.bps();
        sector.saturating_sub(self.boot.heap_offset) * self.per_sector()
            + FIRST_NORMAL_INODE
            + (rel % self.bps()) / 32
    }

    /// Absolute byte offset of inode `inum`'s entry.
    fn inode_offset(&self, inum: u64) -> u64 {
        let i = inum.saturating_sub(FIRST_NORMAL_INODE);
        self.base
            + (self.boot.heap_offset + i / self.per_sector()) * self.bps()
            + (i % self.per_sector()) * 32
    }

    /// The first inode number after the last entry: TSK's `$MBR`.
    fn first_virtual_inode(&self) -> u64 {
        (self.last_sector + 1).saturating_sub(self.boot.heap_offset) * self.per_sector()
            + FIRST_NORMAL_INODE
    }

    /// Whether the cluster holding volume-relative `sector` is allocated, as
    /// TSK's `fatfs_is_sectalloc`: sectors before the heap are, sectors
    /// after it are not.
    fn sector_allocated(&self, sector: u64) -> io::Result<bool> {
        if sector < self.boot.heap_offset {
            return Ok(true);
        }
        if sector >= self.boot.heap_end() {
            return Ok(false);
        }
        let c = 2 + (sector - self.boot.heap_offset) / u64::from(self.boot.sectors_per_cluster);
        self.bitmap.is_allocated(&self.src, c)
    }

    /// Calls `f` with each run of unallocated clusters as absolute extents
    /// in disk order (free by the allocation bitmap), followed by the
    /// sectors after the heap, which no file can own (TSK's `blkls` lists
    /// them as unallocated too).
    pub fn unallocated_runs(&self, mut f: impl FnMut(Extent)) -> Result<(), FsError> {
        let cs = self.cluster_size();
        let end = self.end();
        let tail = self.base + self.boot.heap_end() * self.bps();
        let mut pending: Option<Extent> = None;
        let bitmap_off = self
            .bitmap_at
            .map_or(self.base, |(c, _)| self.cluster_offset(u64::from(c)));
        self.bitmap
            .free_runs(&self.src, |first, count| {
                let offset = self.cluster_offset(first);
                let len = (count * cs).min(end.saturating_sub(offset));
                if len > 0
                    && let Some(p) = pending.replace(Extent { offset, len })
                {
                    f(p);
                }
            })
            .map_err(|e| FsError::io(bitmap_off, 0, e))?;
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

    /// Walks the whole file system depth-first, calling `visit` with one
    /// record per name (TSK's order: a directory's entries as they stand,
    /// each subdirectory walked right after its name), then the virtual
    /// files and the orphans. Returning `ControlFlow::Break` from `visit`
    /// stops the walk. Memory holds one directory chunk per level of the
    /// current path, plus the inode numbers of orphan candidates.
    pub fn walk<F>(&self, visit: F) -> Result<WalkSummary, FsError>
    where
        F: FnMut(FileRecord) -> ControlFlow<()>,
    {
        Ok(walk::walk(self, visit))
    }

    // ------------------------------------------------------------ content

    /// The clusters of a stream: `(first, count)` runs in file order, and
    /// how they were found. Errors are pushed to `errors`.
    fn stream_clusters(
        &self,
        s: &StreamInfo,
        meta_allocated: bool,
        abs: u64,
        budget: &mut u64,
        errors: &mut Vec<ProcessingError>,
    ) -> (Vec<(u64, u64)>, Recovery) {
        let cs = self.cluster_size();
        let last = self.boot.last_cluster();
        let first = u64::from(s.first_cluster);
        let live = |r| {
            if meta_allocated {
                Recovery::Allocated
            } else {
                r
            }
        };
        if s.size == 0 {
            return (Vec::new(), live(Recovery::Unallocated));
        }
        if first < 2 || first > last {
            errors.push(ProcessingError::at(
                ErrorKind::ChainOutOfRange,
                abs,
                format!(
                    "first cluster {first} is outside 2..={last} for a {}-byte stream",
                    s.size
                ),
            ));
            return (Vec::new(), live(Recovery::Unrecoverable));
        }
        let needed = s.size.div_ceil(cs).min(self.boot.cluster_count);
        if !meta_allocated {
            return self.heap().recover(
                first,
                needed,
                abs,
                budget,
                |c| self.bitmap.is_allocated(&self.src, c),
                errors,
            );
        }
        if s.contiguous {
            let n = needed.min(last + 1 - first);
            if n < needed {
                errors.push(ProcessingError::at(
                    ErrorKind::ChainOutOfRange,
                    abs,
                    format!(
                        "contiguous stream of {needed} clusters from cluster {first} runs past the last cluster {last}"
                    ),
                ));
            }
            return (vec![(first, n)], Recovery::Allocated);
        }
        let chain = walk_chain(
            &self.fat,
            &self.src,
            u32::try_from(first).unwrap_or(u32::MAX),
            needed,
        );
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
            other => errors.push(chain_error(abs, other, last, "stream")),
        }
        let runs = chain
            .runs
            .iter()
            .map(|&(c, n)| (u64::from(c), u64::from(n)))
            .collect();
        (runs, Recovery::Allocated)
    }

    /// Content, slack, recovery and the stored runs (before zeroing past
    /// the valid data length: what a directory is parsed from) of a stream.
    fn stream_content(
        &self,
        s: &StreamInfo,
        meta_allocated: bool,
        abs: u64,
        budget: &mut u64,
        errors: &mut Vec<ProcessingError>,
    ) -> StreamContent {
        let (clusters, recovery) = self.stream_clusters(s, meta_allocated, abs, budget, errors);
        let heap = self.heap();
        let stored = heap.runs(&clusters, s.size);
        let slack = heap.slack(&clusters, s.size);
        let mut valid = s.valid;
        if valid > s.size {
            errors.push(ProcessingError::at(
                ErrorKind::AbsurdSize,
                abs,
                format!(
                    "valid data length {valid} is larger than the data length {}: the data length is used",
                    s.size
                ),
            ));
            valid = s.size;
        }
        let stored_len: u64 = stored.iter().map(Run::len).sum();
        let content = if stored.is_empty() {
            Content::None
        } else if valid < stored_len {
            let mut runs = clip_runs(&stored, 0, valid);
            push_run(
                &mut runs,
                Run::Zeros {
                    len: stored_len - valid,
                },
            );
            Content::Runs(runs)
        } else {
            Content::Runs(stored.clone())
        };
        StreamContent {
            content,
            slack,
            recovery,
            stored,
        }
    }

    /// Contiguous content of `size` bytes from `cluster` (the allocation
    /// bitmap and up-case table, read as TSK reads them).
    fn contiguous_content(&self, cluster: u64, size: u64) -> Content {
        let last = self.boot.last_cluster();
        if size == 0 || cluster < 2 || cluster > last {
            return Content::None;
        }
        let n = size.div_ceil(self.cluster_size()).min(last + 1 - cluster);
        let runs = self.heap().runs(&[(cluster, n)], size);
        if runs.is_empty() {
            Content::None
        } else {
            Content::Runs(runs)
        }
    }

    /// Reads the 32-byte entry of inode `inum`, if it is inside the volume.
    fn read_entry(&self, inum: u64) -> Option<[u8; 32]> {
        if inum < FIRST_NORMAL_INODE || inum >= self.first_virtual_inode() {
            return None;
        }
        let mut b = [0u8; 32];
        read_exact_at(&self.src, &mut b, self.inode_offset(inum)).ok()?;
        Some(b)
    }

    /// The FAT's link after cluster `c`, if it names another cluster.
    fn next_cluster(&self, c: u64) -> Option<u64> {
        let c = u32::try_from(c).ok()?;
        match self.fat.link(&self.src, c) {
            Ok(Link::Next(n)) => Some(u64::from(n)),
            _ => None,
        }
    }
}

/// The parts of a Stream Extension entry a record needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamInfo {
    first_cluster: u32,
    size: u64,
    valid: u64,
    contiguous: bool,
}

impl StreamInfo {
    fn of(e: &Entry<'_>) -> Self {
        StreamInfo {
            first_cluster: e.first_cluster(),
            size: e.data_length(),
            valid: e.valid_data_length(),
            contiguous: e.stream_flags() & entry::FLAG_NO_FAT_CHAIN != 0,
        }
    }
}

/// What [`ExfatFs::stream_content`] finds.
pub(crate) struct StreamContent {
    content: Content,
    slack: Vec<Extent>,
    recovery: Recovery,
    /// The stored bytes up to the data length (no zeroing).
    stored: Vec<Run>,
}

/// Checks the main boot region's checksum and, if it fails, says whether
/// the backup region's holds.
fn check_boot_regions<R: ReadAt>(
    src: &R,
    base: u64,
    boot: &ExfatBoot,
    errors: &mut Vec<ProcessingError>,
) {
    let bps = boot.bytes_per_sector as usize;
    let mut region = vec![0u8; 12 * bps];
    let n = read_full(src, &mut region, base).unwrap_or(0);
    region.truncate(n);
    let (sum, bad) = check_boot_region(&region, bps);
    let Some(stored) = bad else { return };
    let mut backup = vec![0u8; 12 * bps];
    let m = read_full(src, &mut backup, base + 12 * bps as u64).unwrap_or(0);
    backup.truncate(m);
    let backup_ok = m == 12 * bps && check_boot_region(&backup, bps).1.is_none();
    errors.push(ProcessingError::at(
        ErrorKind::ChecksumMismatch,
        base + 11 * bps as u64,
        format!(
            "boot region checksum {sum:#010x} does not match the stored {stored:#010x}{}; the main boot sector is used",
            if n < 12 * bps {
                " (the region is cut short)"
            } else if backup_ok {
                " (the backup boot region's checksum holds)"
            } else {
                " (the backup boot region's fails too)"
            }
        ),
    ));
}
