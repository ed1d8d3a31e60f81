//! NTFS: the directory tree from the `$I30` indexes, then every MFT record
//! the tree did not reach (deleted files and directories, orphans).
//!
//! The `ntfs` crate validates the boot sector and gives the volume geometry
//! and parses every `$FILE_NAME`; records, attributes, run lists and index
//! nodes are parsed in this module (`mft.rs`, `index.rs`), for the reasons
//! given there: the crate cannot enumerate records, does not expose the
//! sizes and run lists content needs, and can panic or loop on hostile
//! records and indexes.
//!
//! Records are matched to The Sleuth Kit's `fls` output: one record per
//! `$DATA` attribute and per named index root (`file:stream`, meta address
//! `record-type-id`), directories sized by their `$I30` index root, deleted
//! records placed under their parent when the parent's sequence number still
//! matches (one less for a deleted parent, as NTFS bumps it on deletion),
//! and under `$OrphanFiles` otherwise.

mod bits;
pub mod filename;
mod index;
pub mod mft;

use std::collections::HashMap;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::ControlFlow;
use std::sync::Arc;

use crate::bytes::{decode_utf16, u64_at};
use crate::cache::ChunkCache;
use crate::error::{ErrorKind, FsError, ProcessingError};
use crate::name::hostile_reason;
use crate::read::{ReadAt, read_full};
use crate::record::{
    Content, Encoding, Extent, FileKind, FileRecord, MetaAddr, Owner, Recovery, Run, TimeBase,
    Times, clip_runs, push_run,
};
use crate::walk::{Sink, WalkSummary};

use self::bits::{ClusterBitmap, SparseBits};
use self::filename::{FileName, NAMESPACE_DOS};
use self::mft::{
    ATTR_ATTRIBUTE_LIST, ATTR_DATA, ATTR_FILE_NAME, ATTR_INDEX_ROOT, ATTR_STANDARD_INFORMATION,
    ATTR_VOLUME_INFORMATION, ATTR_VOLUME_NAME, Attribute, Body, DataRun, NonResident, RecordHeader,
};

const ROOT_RECORD: u64 = 5;
const BADCLUS_RECORD: u64 = 8;
/// Deepest directory nesting followed, in the tree walk and when rebuilding
/// a deleted file's path.
const MAX_DEPTH: usize = 256;
/// Most extension records followed from one `$ATTRIBUTE_LIST`.
const MAX_EXTENSION_RECORDS: usize = 512;
/// Largest `$ATTRIBUTE_LIST` value read.
const MAX_ATTRIBUTE_LIST: u64 = 1 << 20;
/// Metadata blocks cached (4 KiB each): records are read through this.
const CACHE_BLOCKS: usize = 256;
const BLOCK: u64 = 4096;
/// Most parent directories remembered while rebuilding deleted paths.
const PATH_CACHE: usize = 4096;
/// MFT bytes read at once during the record scan.
const SCAN_CHUNK: u64 = 1 << 20;

/// `Read + Seek` over a window of a [`ReadAt`], for the `ntfs` crate.
struct CrateIo<'a, R: ?Sized> {
    src: &'a R,
    base: u64,
    len: u64,
    pos: u64,
}

impl<R: ReadAt + ?Sized> Read for CrateIo<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.pos >= self.len {
            return Ok(0);
        }
        let n = usize::try_from(self.len - self.pos)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let got = self.src.read_at(&mut buf[..n], self.base + self.pos)?;
        self.pos += got as u64;
        Ok(got)
    }
}

impl<R: ReadAt + ?Sized> Seek for CrateIo<'_, R> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let p = match pos {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = p.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "bad seek"))?;
        Ok(self.pos)
    }
}

/// Identity and geometry of an opened NTFS volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NtfsInfo {
    /// Bytes per cluster.
    pub cluster_size: u64,
    /// Bytes per MFT record.
    pub record_size: u64,
    /// Number of MFT records (the `$MFT` data size over the record size).
    pub record_count: u64,
    /// Clusters in the volume.
    pub total_clusters: u64,
    /// Volume serial number.
    pub serial: u64,
    /// Volume label from `$Volume`.
    pub volume_name: Option<String>,
    /// NTFS version (major, minor) from `$Volume`.
    pub version: Option<(u8, u8)>,
}

/// An opened NTFS file system.
pub struct NtfsFs<R> {
    src: R,
    base: u64,
    info: NtfsInfo,
    mft: Vec<DataRun>,
    root_seq: u16,
    bitmap: Option<ClusterBitmap>,
    open_errors: Vec<ProcessingError>,
    cache: ChunkCache,
}

/// A file's base record with its extension records' attributes merged in.
struct Loaded {
    record: u64,
    header: RecordHeader,
    attrs: Vec<Attribute>,
    errors: Vec<ProcessingError>,
}

/// An attribute as a whole: non-resident pieces from several records joined.
struct Stream {
    ty: u32,
    name: Vec<u16>,
    instance: u16,
    flags: u16,
    body: StreamBody,
}

enum StreamBody {
    Resident(Vec<u8>),
    NonResident {
        header: NonResident,
        runs: Vec<DataRun>,
    },
}

impl<R: ReadAt> NtfsFs<R> {
    /// Opens the NTFS file system whose boot sector is at byte `base` of
    /// `src`, in a volume of `len` bytes.
    pub fn open(src: R, base: u64, len: u64) -> Result<Self, FsError> {
        let avail = len.min(src.len().saturating_sub(base));
        let mut io = CrateIo {
            src: &src,
            base,
            len: avail,
            pos: 0,
        };
        let ntfs = ntfs::Ntfs::new(&mut io)
            .map_err(|e| FsError::not("NTFS boot sector", e.to_string()))?;
        let cluster_size = u64::from(ntfs.cluster_size());
        let record_size = u64::from(ntfs.file_record_size());
        let mft_pos = ntfs
            .mft_position()
            .value()
            .map(|p| p.get())
            .ok_or_else(|| FsError::not("NTFS boot sector", "no $MFT position"))?;
        let total_clusters = ntfs.size() / cluster_size;
        let mut open_errors = Vec::new();
        if ntfs.size() > avail {
            open_errors.push(ProcessingError::at(
                ErrorKind::CorruptFileSystem,
                base,
                format!(
                    "boot sector claims {} bytes but only {avail} are present",
                    ntfs.size()
                ),
            ));
        }
        let mut boot = [0u8; 512];
        read_full(&src, &mut boot, base).map_err(|e| FsError::io(base, 512, e))?;
        let mirror_lcn = u64_at(&boot, 0x38).unwrap_or(0);
        let mut fs = NtfsFs {
            src,
            base,
            info: NtfsInfo {
                cluster_size,
                record_size,
                record_count: 0,
                total_clusters,
                serial: ntfs.serial_number(),
                volume_name: None,
                version: None,
            },
            mft: Vec::new(),
            root_seq: 0,
            bitmap: None,
            open_errors,
            cache: ChunkCache::new(BLOCK, CACHE_BLOCKS),
        };
        fs.load_mft(mft_pos, mirror_lcn)?;
        match fs.load(ROOT_RECORD) {
            Ok(root) => fs.root_seq = root.header.seq,
            Err(e) => fs.open_errors.push(e),
        }
        fs.load_bitmap();
        fs.load_volume();
        Ok(fs)
    }

    /// Geometry and identity.
    pub fn info(&self) -> &NtfsInfo {
        &self.info
    }

    /// Problems found when opening.
    pub fn open_errors(&self) -> &[ProcessingError] {
        &self.open_errors
    }

    /// The source the file system is read from.
    pub fn source(&self) -> &R {
        &self.src
    }

    fn cs(&self) -> u64 {
        self.info.cluster_size
    }

    fn rs(&self) -> usize {
        usize::try_from(self.info.record_size).unwrap_or(1024)
    }

    /// Reads `$MFT`'s own record (falling back to `$MFTMirr`) and maps the
    /// MFT's data runs, following its attribute list if it has one.
    fn load_mft(&mut self, mft_pos: u64, mirror_lcn: u64) -> Result<(), FsError> {
        let rs = self.rs();
        let mut tries = vec![(self.base + mft_pos, "$MFT")];
        if let Some(m) = mirror_lcn.checked_mul(self.cs()) {
            tries.push((self.base + m, "$MFTMirr"));
        }
        let mut last_err = String::new();
        for (at, what) in tries {
            let mut buf = vec![0u8; rs];
            if let Err(e) = read_full(&self.src, &mut buf, at) {
                last_err = format!("{what} record 0 unreadable: {e}");
                continue;
            }
            let parsed = mft::apply_fixups(&mut buf, b"FILE").and_then(|()| {
                mft::parse_header(&buf).map(|h| (h, mft::parse_attributes(&buf, &h)))
            });
            let (_, attrs) = match parsed {
                Ok(p) => p,
                Err(e) => {
                    last_err = format!("{what} record 0: {e}");
                    continue;
                }
            };
            let Some(data) = attrs
                .list
                .iter()
                .find(|a| a.ty == ATTR_DATA && a.name.is_empty())
            else {
                last_err = format!("{what} record 0 has no $DATA attribute");
                continue;
            };
            let Body::NonResident(nr) = &data.body else {
                last_err = format!("{what} record 0 has a resident $DATA");
                continue;
            };
            let (runs, err) = mft::decode_runs(&nr.runs, nr.start_vcn, self.info.total_clusters);
            if let Some(e) = err {
                self.open_errors.push(ProcessingError::at(
                    ErrorKind::CorruptAttribute,
                    at,
                    format!("$MFT run list: {e}"),
                ));
            }
            if runs.is_empty() {
                last_err = format!("{what} record 0 maps no clusters");
                continue;
            }
            if what != "$MFT" {
                self.open_errors.push(ProcessingError::at(
                    ErrorKind::CorruptRecord,
                    self.base + mft_pos,
                    format!("$MFT record 0 unusable, read from $MFTMirr instead: {last_err}"),
                ));
            }
            self.mft = runs;
            let mut size = nr.data_size;
            // A fragmented $MFT keeps further run-list pieces in extension
            // records named by its attribute list.
            if attrs.list.iter().any(|a| a.ty == ATTR_ATTRIBUTE_LIST) {
                match self.load(0) {
                    Ok(full) => {
                        for s in self.streams(&full) {
                            if s.ty == ATTR_DATA
                                && s.name.is_empty()
                                && let StreamBody::NonResident { header, runs } = s.body
                                && !runs.is_empty()
                            {
                                self.mft = runs;
                                size = header.data_size;
                            }
                        }
                    }
                    Err(e) => self.open_errors.push(e),
                }
            }
            let mapped = self
                .mft
                .iter()
                .fold(0u64, |t, r| t.saturating_add(r.clusters * self.cs()));
            self.info.record_count = size.min(mapped) / self.info.record_size;
            return Ok(());
        }
        Err(FsError::not("NTFS volume", last_err))
    }

    fn load_bitmap(&mut self) {
        let loaded = match self.load(6) {
            Ok(l) => l,
            Err(e) => {
                self.open_errors.push(e);
                return;
            }
        };
        for s in self.streams(&loaded) {
            if s.ty == ATTR_DATA
                && s.name.is_empty()
                && let StreamBody::NonResident { header, runs } = s.body
            {
                let cs = self.cs();
                self.bitmap = Some(ClusterBitmap::new(
                    runs,
                    header.data_size,
                    cs,
                    self.base,
                    self.info.total_clusters,
                ));
            }
        }
        if self.bitmap.is_none() {
            self.open_errors.push(ProcessingError::new(
                ErrorKind::CorruptFileSystem,
                "$Bitmap has no usable $DATA: unallocated clusters and recovery state unknown",
            ));
        }
    }

    fn load_volume(&mut self) {
        let Ok(v) = self.load(3) else {
            return;
        };
        for a in &v.attrs {
            match (a.ty, a.resident()) {
                (ATTR_VOLUME_NAME, Some(b)) => {
                    let units = crate::bytes::utf16_units(b);
                    self.info.volume_name = Some(decode_utf16(&units).0);
                }
                (ATTR_VOLUME_INFORMATION, Some(b)) if b.len() >= 10 => {
                    self.info.version = Some((b[8], b[9]));
                }
                _ => {}
            }
        }
    }

    /// Reads `buf.len()` bytes at absolute `at` through the metadata cache.
    fn read_cached(&self, buf: &mut [u8], at: u64) -> io::Result<()> {
        let n = self.cache.read(at, buf, |blk| {
            let mut b = vec![0u8; BLOCK as usize];
            let n = read_full(&self.src, &mut b, blk * BLOCK)?;
            b.truncate(n);
            Ok(b)
        })?;
        if n < buf.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("source ends at {}", at + n as u64),
            ));
        }
        Ok(())
    }

    /// Reads `buf.len()` bytes of a non-resident attribute at logical offset
    /// `pos`; sparse runs read as zeros. Fails if the runs end first.
    fn read_runs(
        &self,
        runs: &[DataRun],
        pos: u64,
        buf: &mut [u8],
        cached: bool,
    ) -> io::Result<()> {
        bits::read_logical(runs, self.cs(), self.base, pos, buf, |dst, at| {
            if cached {
                self.read_cached(dst, at)
            } else {
                bits::read_exact_direct(&self.src, dst, at)
            }
        })
    }

    /// Absolute offset of record `n` (for error messages), if mapped.
    fn record_offset(&self, n: u64) -> Option<u64> {
        let p = n.checked_mul(self.info.record_size)?;
        let cs = self.cs();
        let vcn = p / cs;
        let r = self
            .mft
            .iter()
            .find(|r| vcn >= r.vcn && vcn - r.vcn < r.clusters)?;
        Some(self.base + r.lcn? * cs + (p - r.vcn * cs))
    }

    /// Reads and fixes up MFT record `n`.
    fn read_record(&self, n: u64) -> Result<Vec<u8>, ProcessingError> {
        let at = self.record_offset(n).unwrap_or(0);
        if n >= self.info.record_count {
            return Err(ProcessingError::new(
                ErrorKind::CorruptRecord,
                format!(
                    "record {n} is past the {} records of the MFT",
                    self.info.record_count
                ),
            ));
        }
        let mut buf = vec![0u8; self.rs()];
        self.read_runs(&self.mft, n * self.info.record_size, &mut buf, true)
            .map_err(|e| ProcessingError::at(ErrorKind::Io, at, format!("record {n}: {e}")))?;
        mft::apply_fixups(&mut buf, b"FILE").map_err(|e| {
            ProcessingError::at(ErrorKind::CorruptRecord, at, format!("record {n}: {e}"))
        })?;
        Ok(buf)
    }

    /// Loads record `n` with its extension records.
    fn load(&self, n: u64) -> Result<Loaded, ProcessingError> {
        let buf = self.read_record(n)?;
        self.load_from(n, &buf)
    }

    fn load_from(&self, n: u64, buf: &[u8]) -> Result<Loaded, ProcessingError> {
        let at = self.record_offset(n).unwrap_or(0);
        let header = mft::parse_header(buf).map_err(|e| {
            ProcessingError::at(ErrorKind::CorruptRecord, at, format!("record {n}: {e}"))
        })?;
        let parsed = mft::parse_attributes(buf, &header);
        let mut errors = Vec::new();
        if let Some(e) = parsed.error {
            errors.push(ProcessingError::at(
                ErrorKind::CorruptAttribute,
                at,
                format!("record {n}: {e}"),
            ));
        }
        let mut attrs = Vec::new();
        let mut list = None;
        for a in parsed.list {
            if a.ty == ATTR_ATTRIBUTE_LIST {
                list = Some(a);
            } else {
                attrs.push(a);
            }
        }
        if let Some(list) = list {
            self.follow_attribute_list(n, at, &list, &mut attrs, &mut errors);
        }
        Ok(Loaded {
            record: n,
            header,
            attrs,
            errors,
        })
    }

    fn follow_attribute_list(
        &self,
        n: u64,
        at: u64,
        list: &Attribute,
        attrs: &mut Vec<Attribute>,
        errors: &mut Vec<ProcessingError>,
    ) {
        let value = match &list.body {
            Body::Resident(v) => v.clone(),
            Body::NonResident(nr) => {
                let (runs, err) = mft::decode_runs(&nr.runs, 0, self.info.total_clusters);
                if let Some(e) = err {
                    errors.push(ProcessingError::at(
                        ErrorKind::CorruptAttribute,
                        at,
                        format!("record {n} attribute list runs: {e}"),
                    ));
                }
                let len = nr.data_size.min(MAX_ATTRIBUTE_LIST);
                let mut v = vec![0u8; usize::try_from(len).unwrap_or(0)];
                if let Err(e) = self.read_runs(&runs, 0, &mut v, true) {
                    errors.push(ProcessingError::at(
                        ErrorKind::Io,
                        at,
                        format!("record {n} attribute list: {e}"),
                    ));
                    return;
                }
                v
            }
        };
        let (entries, err) = mft::parse_attribute_list(&value);
        if let Some(e) = err {
            errors.push(ProcessingError::at(
                ErrorKind::CorruptAttribute,
                at,
                format!("record {n} attribute list: {e}"),
            ));
        }
        let mut ext: Vec<u64> = Vec::new();
        for e in &entries {
            if e.record != n && !ext.contains(&e.record) {
                ext.push(e.record);
            }
        }
        if ext.len() > MAX_EXTENSION_RECORDS {
            errors.push(ProcessingError::at(
                ErrorKind::CorruptAttribute,
                at,
                format!(
                    "record {n} names {} extension records; only {MAX_EXTENSION_RECORDS} followed",
                    ext.len()
                ),
            ));
            ext.truncate(MAX_EXTENSION_RECORDS);
        }
        for x in ext {
            let buf = match self.read_record(x) {
                Ok(b) => b,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            let xat = self.record_offset(x).unwrap_or(0);
            let h = match mft::parse_header(&buf) {
                Ok(h) => h,
                Err(e) => {
                    errors.push(ProcessingError::at(
                        ErrorKind::CorruptRecord,
                        xat,
                        format!("extension record {x} of {n}: {e}"),
                    ));
                    continue;
                }
            };
            if h.base_record() != n {
                errors.push(ProcessingError::at(
                    ErrorKind::CorruptRecord,
                    xat,
                    format!(
                        "extension record {x} belongs to record {}, not {n}",
                        h.base_record()
                    ),
                ));
                continue;
            }
            let parsed = mft::parse_attributes(&buf, &h);
            if let Some(e) = parsed.error {
                errors.push(ProcessingError::at(
                    ErrorKind::CorruptAttribute,
                    xat,
                    format!("extension record {x} of {n}: {e}"),
                ));
            }
            attrs.extend(
                parsed
                    .list
                    .into_iter()
                    .filter(|a| a.ty != ATTR_ATTRIBUTE_LIST),
            );
        }
    }

    /// Joins a file's attributes into streams: non-resident pieces of one
    /// attribute (same type and name) become one run list in VCN order.
    fn streams(&self, f: &Loaded) -> Vec<Stream> {
        let mut out: Vec<Stream> = Vec::new();
        let mut pieces: Vec<Vec<&NonResident>> = Vec::new();
        for a in &f.attrs {
            if a.ty != ATTR_DATA && a.ty != ATTR_INDEX_ROOT {
                continue;
            }
            let existing = out.iter().position(|s| s.ty == a.ty && s.name == a.name);
            match (&a.body, existing) {
                (Body::NonResident(nr), Some(i)) => pieces[i].push(nr),
                (_, Some(_)) => {}
                (body, None) => {
                    out.push(Stream {
                        ty: a.ty,
                        name: a.name.clone(),
                        instance: a.instance,
                        flags: a.flags,
                        body: StreamBody::Resident(Vec::new()),
                    });
                    pieces.push(Vec::new());
                    let i = out.len() - 1;
                    match body {
                        Body::Resident(v) => out[i].body = StreamBody::Resident(v.clone()),
                        Body::NonResident(nr) => pieces[i].push(nr),
                    }
                }
            }
        }
        for (s, mut ps) in out.iter_mut().zip(pieces) {
            if ps.is_empty() {
                continue;
            }
            ps.sort_by_key(|p| p.start_vcn);
            let header = ps
                .iter()
                .find(|p| p.start_vcn == 0)
                .copied()
                .unwrap_or(ps[0])
                .clone();
            let mut runs = Vec::new();
            for p in ps {
                let (r, _) = mft::decode_runs(&p.runs, p.start_vcn, self.info.total_clusters);
                runs.extend(r);
            }
            s.body = StreamBody::NonResident { header, runs };
        }
        out
    }

    /// Size, content and slack of a stream, with problems found.
    ///
    /// `$BadClus:$Bad` gets no content: its size is the volume's and its
    /// runs only mark bad clusters, so reading it as a file means reading a
    /// volume of zeros (TSK's `icat` prints nothing for it either).
    fn stream_content(
        &self,
        s: &Stream,
        f: &Loaded,
        errors: &mut Vec<ProcessingError>,
    ) -> (u64, Content, Vec<Extent>) {
        if f.record == BADCLUS_RECORD
            && s.ty == ATTR_DATA
            && s.name.iter().copied().eq("$Bad".encode_utf16())
        {
            let size = match &s.body {
                StreamBody::Resident(v) => v.len() as u64,
                StreamBody::NonResident { header, .. } => header.data_size,
            };
            return (size, Content::None, Vec::new());
        }
        let (header, runs) = match &s.body {
            StreamBody::Resident(v) => {
                return (v.len() as u64, Content::Resident(v.clone()), Vec::new());
            }
            StreamBody::NonResident { header, runs } => (header, runs),
        };
        let at = self.record_offset(f.record).unwrap_or(0);
        let cs = self.cs();
        // Re-decode each piece to report run-list damage against this stream.
        for a in &f.attrs {
            if a.ty == s.ty
                && a.name == s.name
                && let Body::NonResident(nr) = &a.body
                && let (_, Some(e)) =
                    mft::decode_runs(&nr.runs, nr.start_vcn, self.info.total_clusters)
            {
                errors.push(ProcessingError::at(
                    ErrorKind::CorruptAttribute,
                    at,
                    format!("record {} stream run list: {e}", f.record),
                ));
            }
        }
        let size = header.data_size;
        let volume_bytes = self.info.total_clusters * cs;
        if size > volume_bytes && s.flags & mft::ATTR_FLAG_COMPRESSED == 0 {
            let sparse = runs.iter().any(|r| r.lcn.is_none());
            if !sparse {
                errors.push(ProcessingError::at(
                    ErrorKind::AbsurdSize,
                    at,
                    format!(
                        "record {} stream size {size} exceeds the {volume_bytes}-byte volume",
                        f.record
                    ),
                ));
            }
        }
        let mut byte_runs: Vec<Run> = Vec::new();
        let mut expected_vcn = runs.first().map_or(0, |r| r.vcn);
        for r in runs {
            if r.vcn != expected_vcn {
                errors.push(ProcessingError::at(
                    ErrorKind::CorruptAttribute,
                    at,
                    format!(
                        "record {} run list jumps from VCN {expected_vcn} to {}",
                        f.record, r.vcn
                    ),
                ));
                break;
            }
            expected_vcn = r.vcn + r.clusters;
            let len = r.clusters * cs;
            push_run(
                &mut byte_runs,
                match r.lcn {
                    Some(lcn) => Run::Data {
                        offset: self.base + lcn * cs,
                        len,
                    },
                    None => Run::Zeros { len },
                },
            );
        }
        let alloc = header.allocated_size.max(size);
        let compressed = s.flags & mft::ATTR_FLAG_COMPRESSED != 0;
        // The flag, not the compression unit, says compressed: sparse
        // streams written by ntfs-3g carry a unit too. Windows compresses in
        // units of 16 clusters of at most 4 KiB.
        let undecoded = if s.flags & mft::ATTR_FLAG_ENCRYPTED != 0 {
            Some((Encoding::NtfsEncrypted, "EFS-encrypted".to_string()))
        } else if compressed
            && (header.compression_unit == 0 || header.compression_unit > 8 || cs > 4096)
        {
            Some((
                Encoding::NtfsCompressed,
                format!(
                    "compressed in units of 2^{} clusters of {cs} bytes",
                    header.compression_unit
                ),
            ))
        } else {
            None
        };
        if let Some((encoding, why)) = undecoded {
            errors.push(ProcessingError::at(
                ErrorKind::ContentEncoded,
                at,
                format!(
                    "record {} stream is {why}: its runs give the stored bytes, not the content",
                    f.record
                ),
            ));
            let runs = clip_runs(&byte_runs, 0, alloc);
            return (size, Content::Encoded { encoding, runs }, Vec::new());
        }
        if compressed {
            let content = Content::Compressed {
                runs: clip_runs(&byte_runs, 0, alloc),
                unit: cs << header.compression_unit,
                size,
                initialized: header.initialized_size.min(size),
            };
            return (size, content, Vec::new());
        }
        let total = byte_runs
            .iter()
            .fold(0u64, |t, r| t.saturating_add(r.len()));
        if total < size {
            errors.push(ProcessingError::at(
                ErrorKind::ChainTooShort,
                at,
                format!(
                    "record {} run list maps {total} of the stream's {size} bytes",
                    f.record
                ),
            ));
        }
        // Bytes past the valid-data (initialized) length read as zeros.
        let init = header.initialized_size.min(size);
        let mut content = clip_runs(&byte_runs, 0, init.min(total));
        if size > init {
            push_run(
                &mut content,
                Run::Zeros {
                    len: size.min(total.max(init)) - init,
                },
            );
        }
        let slack_end = header.allocated_size.min(total);
        let slack = clip_runs(&byte_runs, size, slack_end)
            .into_iter()
            .filter_map(|r| match r {
                Run::Data { offset, len } => Some(Extent { offset, len }),
                Run::Zeros { .. } => None,
            })
            .collect();
        (size, Content::Runs(content), slack)
    }

    /// How far a deleted file's content can be trusted: overwritten if any
    /// of its clusters is allocated now.
    fn recovery_of(&self, content: &Content, allocated: bool) -> Recovery {
        if allocated {
            return Recovery::Allocated;
        }
        let Some(bm) = &self.bitmap else {
            return Recovery::Unallocated;
        };
        let cs = self.cs();
        for e in content.extents() {
            let first = (e.offset - self.base) / cs;
            let count = e.len.div_ceil(cs);
            match bm.any_allocated(&self.src, first, count) {
                Ok(true) => return Recovery::Overwritten,
                Ok(false) => {}
                Err(_) => return Recovery::Unrecoverable,
            }
        }
        Recovery::Unallocated
    }

    /// Calls `f` with each run of unallocated clusters (from `$Bitmap`), as
    /// absolute extents.
    pub fn unallocated_runs(&self, mut f: impl FnMut(Extent)) -> Result<(), FsError> {
        let Some(bm) = &self.bitmap else {
            return Err(FsError::not("NTFS $Bitmap", "unreadable"));
        };
        let cs = self.cs();
        bm.free_runs(&self.src, |first, count| {
            f(Extent {
                offset: self.base + first * cs,
                len: count * cs,
            })
        })
        .map_err(|e| FsError::io(self.base, 0, e))
    }

    /// Walks the directory tree from the root, then every MFT record the tree
    /// did not reach, calling `visit` with one record per name and stream.
    pub fn walk<F>(&self, visit: F) -> Result<WalkSummary, FsError>
    where
        F: FnMut(FileRecord) -> ControlFlow<()>,
    {
        let mut w = Walker {
            fs: self,
            sink: Sink::new(visit, &self.open_errors),
            emitted: SparseBits::default(),
            walked: SparseBits::default(),
            stack: Vec::new(),
            dirs: HashMap::new(),
        };
        let root: Arc<[String]> = Arc::from(Vec::new());
        w.emitted.set(ROOT_RECORD);
        let flow = match self.load(ROOT_RECORD) {
            Ok(r) => {
                w.walked.set(ROOT_RECORD);
                w.remember_dir(ROOT_RECORD, r.header.seq, &root);
                w.stack.push(ROOT_RECORD);
                let f = w.walk_dir(&r, &root, 0);
                w.stack.pop();
                f
            }
            Err(e) => {
                w.sink.error(e);
                ControlFlow::Continue(())
            }
        };
        let flow = if flow.is_continue() {
            w.orphan_dir(&root)
        } else {
            flow
        };
        let flow = if flow.is_continue() { w.scan() } else { flow };
        Ok(w.sink.finish(flow))
    }
}

/// What path rebuilding remembers about a directory record.
#[derive(Clone)]
struct DirInfo {
    seq: u16,
    in_use: bool,
    is_dir: bool,
    /// The directory's own path, once known.
    path: Option<Arc<[String]>>,
    /// Its name and parent reference, for rebuilding the path.
    name: Option<(String, u64, u16)>,
}

struct Walker<'a, R, F> {
    fs: &'a NtfsFs<R>,
    sink: Sink<F>,
    /// Records already given a record (through an index or the scan).
    emitted: SparseBits,
    /// Directories already walked.
    walked: SparseBits,
    stack: Vec<u64>,
    dirs: HashMap<u64, DirInfo>,
}

impl<R: ReadAt, F: FnMut(FileRecord) -> ControlFlow<()>> Walker<'_, R, F> {
    fn emit(&mut self, rec: FileRecord) -> ControlFlow<()> {
        self.sink.emit(rec)
    }

    fn remember_dir(&mut self, rec: u64, seq: u16, path: &Arc<[String]>) {
        if self.dirs.len() >= PATH_CACHE {
            self.dirs.clear();
        }
        self.dirs.insert(
            rec,
            DirInfo {
                seq,
                in_use: true,
                is_dir: true,
                path: Some(path.clone()),
                name: None,
            },
        );
    }

    /// Walks one directory's index, emitting its entries and descending into
    /// allocated subdirectories.
    fn walk_dir(&mut self, dir: &Loaded, path: &Arc<[String]>, depth: usize) -> ControlFlow<()> {
        let fs = self.fs;
        let mut errors = Vec::new();
        let mut nodes = index::IndexNodes::new(fs, dir, &mut errors);
        loop {
            let node = nodes.next_node(fs, &mut errors);
            for e in errors.drain(..) {
                self.sink.error(e);
            }
            let Some(entries) = node else {
                break;
            };
            self.walk_entries(dir, entries, path, depth)?;
        }
        ControlFlow::Continue(())
    }

    /// Emits one index node's entries, descending into subdirectories.
    fn walk_entries(
        &mut self,
        dir: &Loaded,
        entries: Vec<index::IndexEntry>,
        path: &Arc<[String]>,
        depth: usize,
    ) -> ControlFlow<()> {
        let fs = self.fs;
        for entry in entries {
            if entry.name.namespace == NAMESPACE_DOS {
                continue;
            }
            let child = entry.file_ref & 0x0000_FFFF_FFFF_FFFF;
            let child_seq = (entry.file_ref >> 48) as u16;
            if child == dir.record {
                continue;
            }
            self.emitted.set(child);
            let mut errs = Vec::new();
            let loaded = match fs.load(child) {
                Ok(l) => Some(l),
                Err(e) => {
                    errs.push(e);
                    None
                }
            };
            let mut allocated = true;
            if let Some(l) = &loaded
                && (!l.header.in_use() || l.header.seq != child_seq)
            {
                allocated = false;
                errs.push(ProcessingError::at(
                    ErrorKind::CorruptIndex,
                    entry.offset,
                    format!(
                        "index entry `{}` names record {child} sequence {child_seq}, but the record is {} with sequence {}",
                        crate::name::escape_component(&entry.name.name),
                        if l.header.in_use() { "in use" } else { "free" },
                        l.header.seq
                    ),
                ));
            }
            let is_dir =
                self.emit_file(child, loaded.as_ref(), &entry.name, path, allocated, errs)?;
            let Some(l) = loaded else {
                continue;
            };
            if !(is_dir && allocated) {
                continue;
            }
            if self.stack.contains(&child) || self.walked.get(child) {
                self.sink.error(ProcessingError::at(
                    ErrorKind::DirectoryLoop,
                    entry.offset,
                    format!(
                        "directory `{}` (record {child}) contains an ancestor or was already walked; not entered again",
                        crate::name::escape_component(&entry.name.name)
                    ),
                ));
                continue;
            }
            if depth + 1 >= MAX_DEPTH {
                self.sink.error(ProcessingError::at(
                    ErrorKind::WalkLimit,
                    entry.offset,
                    format!("directory record {child} not entered: depth {}", depth + 1),
                ));
                continue;
            }
            self.walked.set(child);
            let mut p: Vec<String> = path.to_vec();
            p.push(entry.name.name.clone());
            let p: Arc<[String]> = Arc::from(p);
            self.remember_dir(child, l.header.seq, &p);
            self.stack.push(child);
            let flow = self.walk_dir(&l, &p, depth + 1);
            self.stack.pop();
            flow?;
        }
        ControlFlow::Continue(())
    }

    /// Emits the records for one name of a file: one per `$DATA` and named
    /// index root, or one bare record when it has neither. Returns whether
    /// the file is a directory.
    fn emit_file(
        &mut self,
        recno: u64,
        loaded: Option<&Loaded>,
        name: &FileName,
        parent: &Arc<[String]>,
        allocated: bool,
        mut errors: Vec<ProcessingError>,
    ) -> ControlFlow<(), bool> {
        let fs = self.fs;
        let at = fs.record_offset(recno).unwrap_or(0);
        if let Some(why) = hostile_reason(&name.name) {
            errors.push(ProcessingError::at(ErrorKind::HostileName, at, why));
        }
        if !name.exact {
            errors.push(ProcessingError::at(
                ErrorKind::NameEncoding,
                at,
                "name holds unpaired UTF-16 surrogates (shown as U+FFFD)",
            ));
        }
        let base = FileRecord {
            parent: parent.clone(),
            name: name.name.clone(),
            raw_name: name.raw_name(),
            short_name: None,
            stream: None,
            meta: MetaAddr {
                inode: recno,
                attr: None,
            },
            kind: if name.is_directory {
                FileKind::Directory
            } else {
                FileKind::File
            },
            size: 0,
            times: Times::default(),
            name_times: Some(name.times),
            time_base: TimeBase::Utc,
            allocated,
            attributes: 0,
            owner: Owner::default(),
            content: Content::None,
            slack: Vec::new(),
            recovery: if allocated {
                Recovery::Allocated
            } else {
                Recovery::Unrecoverable
            },
            errors: Vec::new(),
        };
        let Some(l) = loaded else {
            let mut rec = base;
            rec.errors = errors;
            self.emit(rec)?;
            return ControlFlow::Continue(name.is_directory);
        };
        errors.extend(l.errors.iter().cloned());
        let mut base = base;
        let is_dir = l.header.is_directory();
        base.kind = if is_dir {
            FileKind::Directory
        } else {
            FileKind::File
        };
        for a in &l.attrs {
            match a.ty {
                ATTR_STANDARD_INFORMATION => {
                    if let Some(v) = a.resident().filter(|v| v.len() >= 48) {
                        let t = |o: usize| u64_at(v, o).and_then(filename::nt_time);
                        base.times = Times {
                            created: t(0),
                            modified: t(8),
                            changed: t(16),
                            accessed: t(24),
                        };
                        base.attributes = crate::bytes::u32_at(v, 32).unwrap_or(0);
                        // NTFS 3.0's longer form holds the owner id.
                        let owner_id = crate::bytes::u32_at(v, 48).unwrap_or(0);
                        base.owner = Owner::ntfs(base.attributes, owner_id);
                    }
                }
                ATTR_FILE_NAME => {
                    let Some(f) = a.resident().and_then(|v| filename::parse(v, at).ok()) else {
                        continue;
                    };
                    if f.parent_record != name.parent_record {
                        continue;
                    }
                    // The record's own $FILE_NAME has this name's times; the
                    // copy in the parent's index can be stale (system files
                    // carry zeros there).
                    if f.units == name.units {
                        base.name_times = Some(f.times);
                    } else if f.namespace == NAMESPACE_DOS && name.namespace != 3 {
                        base.short_name = Some(f.name);
                    }
                }
                _ => {}
            }
        }
        let streams = fs.streams(l);
        let mut first = true;
        let mut emitted_any = false;
        for s in &streams {
            let mut rec = base.clone();
            let mut errs = if first {
                std::mem::take(&mut errors)
            } else {
                Vec::new()
            };
            first = false;
            let is_i30 =
                s.ty == ATTR_INDEX_ROOT && s.name.iter().copied().eq("$I30".encode_utf16());
            if s.ty == ATTR_INDEX_ROOT && is_i30 {
                rec.kind = FileKind::Directory;
            } else {
                if !s.name.is_empty() {
                    let (n, exact) = decode_utf16(&s.name);
                    if !exact {
                        errs.push(ProcessingError::at(
                            ErrorKind::NameEncoding,
                            at,
                            "stream name holds unpaired UTF-16 surrogates",
                        ));
                    }
                    if let Some(why) = hostile_reason(&n) {
                        errs.push(ProcessingError::at(
                            ErrorKind::HostileName,
                            at,
                            format!("stream: {why}"),
                        ));
                    }
                    rec.stream = Some(n);
                }
                if !(is_dir && s.ty == ATTR_DATA && s.name.is_empty()) {
                    rec.kind = FileKind::File;
                }
            }
            rec.meta.attr = Some((s.ty, s.instance));
            let (size, content, slack) = fs.stream_content(s, l, &mut errs);
            rec.size = size;
            rec.recovery = fs.recovery_of(&content, allocated);
            rec.content = content;
            rec.slack = slack;
            rec.errors = errs;
            emitted_any = true;
            self.emit(rec)?;
        }
        if !emitted_any {
            let mut rec = base;
            rec.errors = errors;
            rec.recovery = if allocated {
                Recovery::Allocated
            } else {
                Recovery::Unallocated
            };
            self.emit(rec)?;
        }
        let has_i30 = streams
            .iter()
            .any(|s| s.ty == ATTR_INDEX_ROOT && s.name.iter().copied().eq("$I30".encode_utf16()));
        ControlFlow::Continue(is_dir && has_i30)
    }

    /// TSK's `$OrphanFiles` virtual directory, numbered after the last record.
    fn orphan_dir(&mut self, root: &Arc<[String]>) -> ControlFlow<()> {
        let rec = FileRecord::named(
            root.clone(),
            "$OrphanFiles".to_string(),
            b"$OrphanFiles".to_vec(),
            self.fs.info.record_count,
            FileKind::VirtualDirectory,
        );
        self.emit(rec)
    }

    /// Reads the whole MFT in order and emits every base record with a name
    /// that the tree walk did not reach: deleted files and directories, and
    /// live files missing from their directory's index.
    fn scan(&mut self) -> ControlFlow<()> {
        let fs = self.fs;
        let rs = fs.info.record_size;
        let per_chunk = (SCAN_CHUNK / rs).max(1);
        let mut first = 0u64;
        while first < fs.info.record_count {
            let count = per_chunk.min(fs.info.record_count - first);
            let mut chunk = vec![0u8; usize::try_from(count * rs).unwrap_or(0)];
            if let Err(e) = fs.read_runs(&fs.mft, first * rs, &mut chunk, false) {
                self.sink.error(ProcessingError::at(
                    ErrorKind::Io,
                    fs.record_offset(first).unwrap_or(0),
                    format!("MFT records {first}..{}: {e}", first + count),
                ));
                first += count;
                continue;
            }
            for i in 0..count {
                let n = first + i;
                if self.emitted.get(n) {
                    continue;
                }
                let off = usize::try_from(i * rs).unwrap_or(0);
                let mut buf = chunk[off..off + fs.rs()].to_vec();
                self.scan_record(n, &mut buf)?;
            }
            first += count;
        }
        ControlFlow::Continue(())
    }

    fn scan_record(&mut self, n: u64, buf: &mut [u8]) -> ControlFlow<()> {
        let fs = self.fs;
        let at = fs.record_offset(n).unwrap_or(0);
        if buf.starts_with(b"BAAD") {
            self.sink.error(ProcessingError::at(
                ErrorKind::CorruptRecord,
                at,
                format!("record {n} is marked BAAD (failed multi-sector transfer)"),
            ));
            return ControlFlow::Continue(());
        }
        if !buf.starts_with(b"FILE") {
            return ControlFlow::Continue(());
        }
        if let Err(e) = mft::apply_fixups(buf, b"FILE") {
            self.sink.error(ProcessingError::at(
                ErrorKind::CorruptRecord,
                at,
                format!("record {n}: {e}"),
            ));
            return ControlFlow::Continue(());
        }
        let loaded = match fs.load_from(n, buf) {
            Ok(l) => l,
            Err(e) => {
                self.sink.error(e);
                return ControlFlow::Continue(());
            }
        };
        if loaded.header.base_record() != 0 {
            return ControlFlow::Continue(());
        }
        let in_use = loaded.header.in_use();
        let mut names = names_of(&loaded, at);
        if names.is_empty() {
            // A free record that was used once (sequence number set, some
            // attribute left) but has no name: TSK lists it as
            // `$OrphanFiles/OrphanFile-N`. Formatted-but-never-used records
            // (no attributes, or sequence 0) are not files.
            if in_use || loaded.header.seq == 0 || loaded.attrs.is_empty() {
                return ControlFlow::Continue(());
            }
            let name = format!("OrphanFile-{n}");
            names.push(FileName {
                parent_record: u64::MAX,
                parent_seq: 0,
                units: name.encode_utf16().collect(),
                name,
                exact: true,
                namespace: 1,
                times: Times::default(),
                is_directory: loaded.header.is_directory(),
            });
        }
        self.emitted.set(n);
        for name in names {
            let parent = self.parent_path(name.parent_record, name.parent_seq, 0);
            let mut errors = Vec::new();
            if in_use {
                errors.push(ProcessingError::at(
                    ErrorKind::CorruptIndex,
                    at,
                    format!("record {n} is in use but not listed in its parent directory's index"),
                ));
            }
            self.emit_file(n, Some(&loaded), &name, &parent, in_use, errors)?;
        }
        ControlFlow::Continue(())
    }

    /// Path of the directory a name's parent reference points to, or
    /// `$OrphanFiles` when that reference no longer holds (parent not a
    /// directory, or its sequence number moved on).
    fn parent_path(&mut self, rec: u64, seq: u16, depth: usize) -> Arc<[String]> {
        let orphan = || -> Arc<[String]> { Arc::from(vec!["$OrphanFiles".to_string()]) };
        if rec == ROOT_RECORD {
            return if seq == self.fs.root_seq {
                Arc::from(Vec::new())
            } else {
                orphan()
            };
        }
        let Some(info) = self.dir_info(rec) else {
            return orphan();
        };
        // NTFS bumps a record's sequence number when it is freed, so a
        // deleted directory's children carry the number before that.
        let expected = if info.in_use {
            info.seq
        } else {
            info.seq.saturating_sub(1)
        };
        if !info.is_dir || expected != seq {
            return orphan();
        }
        if let Some(p) = info.path {
            return p;
        }
        let Some((name, prec, pseq)) = info.name else {
            return orphan();
        };
        if depth >= MAX_DEPTH || prec == rec {
            self.sink.error(ProcessingError::new(
                ErrorKind::DirectoryLoop,
                format!("parent chain of record {rec} loops or exceeds depth {MAX_DEPTH}"),
            ));
            return orphan();
        }
        let mut p: Vec<String> = self.parent_path(prec, pseq, depth + 1).to_vec();
        p.push(name);
        let p: Arc<[String]> = Arc::from(p);
        if let Some(d) = self.dirs.get_mut(&rec) {
            d.path = Some(p.clone());
        }
        p
    }

    fn dir_info(&mut self, rec: u64) -> Option<DirInfo> {
        if let Some(d) = self.dirs.get(&rec) {
            return Some(d.clone());
        }
        let buf = self.fs.read_record(rec).ok()?;
        let h = mft::parse_header(&buf).ok()?;
        let at = self.fs.record_offset(rec).unwrap_or(0);
        let attrs = mft::parse_attributes(&buf, &h);
        let l = Loaded {
            record: rec,
            header: h,
            attrs: attrs.list,
            errors: Vec::new(),
        };
        let name = names_of(&l, at)
            .into_iter()
            .next()
            .map(|f| (f.name, f.parent_record, f.parent_seq));
        let info = DirInfo {
            seq: h.seq,
            in_use: h.in_use(),
            is_dir: h.is_directory(),
            path: None,
            name,
        };
        if self.dirs.len() >= PATH_CACHE {
            self.dirs.clear();
        }
        self.dirs.insert(rec, info.clone());
        Some(info)
    }
}

/// The names a record is listed under: its `$FILE_NAME`s, leaving out DOS
/// 8.3 names when the record has another name in the same directory.
fn names_of(l: &Loaded, at: u64) -> Vec<FileName> {
    let all: Vec<FileName> = l
        .attrs
        .iter()
        .filter(|a| a.ty == ATTR_FILE_NAME)
        .filter_map(|a| a.resident())
        .filter_map(|v| filename::parse(v, at).ok())
        .collect();
    all.iter()
        .filter(|f| {
            f.namespace != NAMESPACE_DOS
                || !all
                    .iter()
                    .any(|o| o.namespace != NAMESPACE_DOS && o.parent_record == f.parent_record)
        })
        .cloned()
        .collect()
}
