//! Meta carving: FAT directory entries and NTFS `FILE` records found in
//! raw sectors, outside any directory tree.
//!
//! `caseload-fs` parses these structures while walking a file system, but
//! only reachable ones and through crate-private types; carving meets them
//! loose (a deleted directory's cluster, an old MFT copy, slack), so it
//! needs standalone tests: is this sector a directory sector, is this
//! record a `FILE` record, and what do they say. Every length and offset
//! is checked against the bytes at hand.

use super::formats::{le16, le32, le64};
use caseload_fs::fat::boot::BootSector;
use caseload_fs::fat::dir::{self, Dentry, is_83_char, is_date, is_time};

/// File-system time as Unix seconds (FAT: the local wall clock read as
/// UTC, as the filesystem stage stores it).
pub type Secs = Option<i64>;

/// One recovered metadata record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaRecord {
    /// `fat-dentry` or `mft-record`.
    pub record: &'static str,
    /// Media offset of the record (a FAT entry's first long-name slot).
    pub offset: u64,
    /// Bytes of the record on the media.
    pub length: u64,
    /// The recovered name (long name when it was intact).
    pub name: String,
    /// `file` or `directory`.
    pub kind: &'static str,
    /// Recorded logical size.
    pub size: u64,
    /// Whether the record is marked deleted (FAT 0xE5; NTFS not in use).
    pub deleted: bool,
    /// Modified, accessed, changed, created.
    pub times: [Secs; 4],
    /// FAT: first cluster.
    pub first_cluster: Option<u64>,
    /// NTFS: the unnamed `$DATA` stream.
    pub data: NtfsData,
    /// TSK-style address: FAT inode from the entry's position, NTFS
    /// record number.
    pub meta_addr: Option<String>,
    /// Anything worth telling (bad long name, ...).
    pub note: Option<String>,
}

/// Where an NTFS record keeps its unnamed data stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NtfsData {
    /// Not an NTFS record, or no `$DATA`.
    #[default]
    None,
    /// Resident bytes.
    Resident(Vec<u8>),
    /// Runs of (first cluster or sparse, cluster count), from VCN 0.
    Runs(Vec<(Option<u64>, u64)>),
    /// Compressed or encrypted: not recoverable as plain bytes.
    Encoded,
}

// ---------------------------------------------------------------- FAT ---

use caseload_fs::fat::dir::{ATTR_DIRECTORY, ATTR_LFN, ATTR_VOLUME, SLOT_DELETED as DELETED};

/// FAT geometry needed to judge and place directory entries.
#[derive(Debug, Clone)]
pub struct FatGeometry {
    /// Media offset of the volume.
    pub base: u64,
    /// Bytes per sector.
    pub bps: u64,
    /// Bytes per cluster.
    pub cluster_size: u64,
    /// Volume-relative first sector of cluster 2.
    pub first_cluster_sector: u64,
    /// Volume-relative first sector after the FATs (TSK numbers entries
    /// from here).
    pub first_data_sector: u64,
    /// Highest valid cluster.
    pub last_cluster: u64,
    /// FAT12, FAT16 or FAT32 (12, 16, 32).
    pub bits: u8,
    /// Media offset of the first FAT.
    pub fat_offset: u64,
    /// FAT32 root directory cluster.
    pub root_cluster: u32,
}

impl FatGeometry {
    /// Geometry from a parsed boot sector.
    pub fn new(base: u64, boot: &BootSector) -> Self {
        let bits = match boot.kind {
            caseload_fs::FsKind::Fat12 => 12,
            caseload_fs::FsKind::Fat16 => 16,
            _ => 32,
        };
        let bps = u64::from(boot.bytes_per_sector);
        FatGeometry {
            base,
            bps,
            cluster_size: boot.cluster_size(),
            first_cluster_sector: boot.first_cluster_sector,
            first_data_sector: boot.first_data_sector,
            last_cluster: boot.last_cluster(),
            bits,
            fat_offset: base + u64::from(boot.reserved_sectors) * bps,
            root_cluster: boot.root_cluster,
        }
    }

    /// Media offset of a cluster.
    pub fn cluster_offset(&self, c: u64) -> u64 {
        self.base
            + (self.first_cluster_sector
                + c.saturating_sub(2) * (self.cluster_size / self.bps.max(1)))
                * self.bps
    }

    /// The FAT12/16 fixed root directory as a media range.
    pub fn fixed_root(&self) -> Option<(u64, u64)> {
        (self.bits != 32 && self.first_cluster_sector > self.first_data_sector).then(|| {
            (
                self.base + self.first_data_sector * self.bps,
                self.base + self.first_cluster_sector * self.bps,
            )
        })
    }

    /// The FAT entry of `cluster`, read with `read` (offset, buffer).
    pub fn entry(&self, cluster: u64, read: &mut dyn FnMut(u64, &mut [u8]) -> bool) -> Option<u32> {
        let mut b = [0u8; 4];
        match self.bits {
            12 => {
                let at = self.fat_offset + cluster * 3 / 2;
                if !read(at, &mut b[..2]) {
                    return None;
                }
                let v = u32::from(le16(&b, 0));
                Some(if cluster & 1 == 1 { v >> 4 } else { v & 0xFFF })
            }
            16 => read(self.fat_offset + cluster * 2, &mut b[..2]).then(|| u32::from(le16(&b, 0))),
            _ => read(self.fat_offset + cluster * 4, &mut b).then(|| le32(&b, 0) & 0x0FFF_FFFF),
        }
    }

    /// Whether clusters `[first, first + count)` are all free (FAT entry
    /// 0), reading the FAT in chunks; `None` when it cannot be read.
    pub fn all_free(
        &self,
        first: u64,
        count: u64,
        read: &mut dyn FnMut(u64, &mut [u8]) -> bool,
    ) -> Option<bool> {
        const CHUNK: u64 = 16_384;
        let mut c = first;
        let end = first.checked_add(count)?;
        let mut buf = Vec::new();
        while c < end {
            let n = (end - c).min(CHUNK);
            // Bytes holding entries c..c+n (FAT12 packs two in three bytes).
            let (from, to) = match self.bits {
                12 => (c * 3 / 2, (c + n) * 3 / 2 + 2),
                16 => (c * 2, (c + n) * 2),
                _ => (c * 4, (c + n) * 4),
            };
            buf.resize(usize::try_from(to - from).ok()?, 0);
            if !read(self.fat_offset + from, &mut buf) {
                return None;
            }
            for k in c..c + n {
                let v = match self.bits {
                    12 => {
                        let o = usize::try_from(k * 3 / 2 - from).ok()?;
                        let v = u32::from(le16(&buf, o));
                        if k & 1 == 1 { v >> 4 } else { v & 0xFFF }
                    }
                    16 => u32::from(le16(&buf, usize::try_from((k - c) * 2).ok()?)),
                    _ => le32(&buf, usize::try_from((k - c) * 4).ok()?) & 0x0FFF_FFFF,
                };
                if v != 0 {
                    return Some(false);
                }
            }
            c += n;
        }
        Some(true)
    }

    /// Whether a FAT value ends a chain.
    pub fn is_eof(&self, v: u32) -> bool {
        match self.bits {
            12 => v >= 0xFF8,
            16 => v >= 0xFFF8,
            _ => v >= 0x0FFF_FFF8,
        }
    }

    /// TSK inode number of the entry at media offset `at`, when it lies
    /// in the volume's data area.
    fn inode(&self, at: u64) -> Option<u64> {
        let rel = at.checked_sub(self.base)?;
        let sector = rel / self.bps;
        let idx = (rel % self.bps) / 32;
        let first = self.first_data_sector;
        (sector >= first).then(|| (sector - first) * (self.bps / 32) + 3 + idx)
    }
}

/// What one 32-byte slot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// All zeros (never used).
    Empty,
    /// A long-name piece.
    LongName,
    /// A short (8.3) entry; `dot` for `.` and `..`.
    Short { dot: bool },
    /// Not a directory entry.
    Garbage,
}

/// Classify a slot with TSK's in-depth test (used in unallocated
/// sectors); `last_cluster` bounds the start cluster when known.
fn classify(s: &[u8], last_cluster: Option<u64>, fat32: bool) -> Slot {
    let Some(d) = Dentry::at(s) else {
        return Slot::Garbage;
    };
    if s.iter().all(|&b| b == 0) {
        return Slot::Empty;
    }
    let attr = d.attr();
    if attr & ATTR_LFN == ATTR_LFN && attr & 0xC0 == 0 {
        let seq = d.lfn_seq();
        let ok_seq = seq == DELETED || (seq & 0x80 == 0 && seq & 0x1f != 0 && seq & 0x3f <= 20);
        // Type 0 and first cluster 0 in every long-name slot.
        return if ok_seq && d.lowercase() == 0 && d.cluster(false) == 0 {
            Slot::LongName
        } else {
            Slot::Garbage
        };
    }
    if s[0] == 0 || attr & 0xC0 != 0 || d.lowercase() & !0x18 != 0 {
        return Slot::Garbage;
    }
    if attr & ATTR_VOLUME != 0 && attr & (ATTR_DIRECTORY | 0x01 | 0x20) != 0 {
        return Slot::Garbage;
    }
    let (ctime, cdate, adate, wtime, wdate) =
        (d.ctime(), d.cdate(), d.adate(), d.wtime(), d.wdate());
    if (ctime != 0 && !is_time(ctime))
        || (wtime != 0 && !is_time(wtime))
        || (cdate != 0 && !is_date(cdate))
        || (adate != 0 && !is_date(adate))
        || (wdate != 0 && !is_date(wdate))
        || d.ctime_tenths() > 199
    {
        return Slot::Garbage;
    }
    // An entry always has a modification date (TSK's "all zero" test,
    // made strict: unallocated sectors hold much noise).
    if wdate == 0 {
        return Slot::Garbage;
    }
    let cluster = u64::from(d.cluster(fat32));
    if !fat32 && d.cluster_high() != 0 {
        return Slot::Garbage;
    }
    if let Some(last) = last_cluster
        && cluster > last
    {
        return Slot::Garbage;
    }
    let size = d.size();
    // Directories record size 0, but some writers store their byte count
    // (DFTT #6's deleted `dir1` says 1024), which TSK ignores; only a
    // count that is no whole number of entries marks noise.
    if attr & ATTR_DIRECTORY != 0 && !size.is_multiple_of(32) {
        return Slot::Garbage;
    }
    if size > 0 && cluster == 0 {
        return Slot::Garbage;
    }
    let dot = d.is_dot();
    if !dot {
        let name = d.name_bytes();
        let first_ok = name[0] == DELETED || name[0] == 0x05 || is_83_char(name[0]);
        if !first_ok || name[0] == b' ' || !name[1..].iter().all(|&c| is_83_char(c)) {
            return Slot::Garbage;
        }
        // A space may only be followed by spaces, in name and extension.
        if attr & ATTR_VOLUME == 0 {
            let base_ok = name[1..8].windows(2).all(|w| w[0] != b' ' || w[1] == b' ');
            let ext_ok = name[8..11].windows(2).all(|w| w[0] != b' ' || w[1] == b' ');
            if !base_ok || !ext_ok {
                return Slot::Garbage;
            }
        }
    }
    Slot::Short { dot }
}

/// Whether a sector holds directory entries: every slot is an entry or
/// empty, and there is at least one short entry. Noise and file data fail
/// within a slot or two (the case byte and the attribute's high bits).
pub fn is_dir_sector(sector: &[u8], geometry: Option<&FatGeometry>) -> bool {
    if sector.len() < 512 || sector[0] == 0 {
        return false;
    }
    let fat32 = geometry.is_none_or(|g| g.bits == 32);
    let last = geometry.map(|g| g.last_cluster);
    let mut short = 0;
    for s in sector.chunks_exact(32) {
        match classify(s, last, fat32) {
            Slot::Garbage => return false,
            Slot::Short { .. } => short += 1,
            Slot::Empty | Slot::LongName => {}
        }
    }
    short > 0
}

/// FAT date and time as the filesystem stage stores them (wall clock read
/// as UTC, whole seconds).
fn dos_secs(date: u16, time: u16) -> Secs {
    dir::dos_time(date, time, 0).map(|t| t.secs)
}

/// Long-name pieces collected before a short entry.
#[derive(Debug, Default, Clone)]
pub struct LongName {
    /// Pieces in on-disk order (last part of the name first).
    pieces: Vec<[u16; 13]>,
    checksum: u8,
    /// Media offset of the first piece.
    start: u64,
}

impl LongName {
    /// The name, when the pieces belong to the short entry `name11`.
    fn name_for(&self, name11: &[u8]) -> Option<String> {
        if self.pieces.is_empty() {
            return None;
        }
        let name = self.text()?;
        if dir::lfn_checksum(name11) == self.checksum {
            return Some(name);
        }
        // Deletion overwrote the short name's first byte, over which the
        // checksum was taken. Windows derives that byte from the long
        // name's first usable character, upper-cased: try that one.
        if name11.first() != Some(&DELETED) {
            return None;
        }
        let first = name
            .chars()
            .find(|&c| c != '.' && c != ' ')
            .filter(char::is_ascii)?;
        let mut restored = name11.to_vec();
        restored[0] = first.to_ascii_uppercase() as u8;
        (dir::lfn_checksum(&restored) == self.checksum).then_some(name)
    }

    /// The long name the pieces spell (pieces are on disk last part
    /// first).
    fn text(&self) -> Option<String> {
        let in_order: Vec<[u16; 13]> = self.pieces.iter().rev().copied().collect();
        let name = dir::assemble_long_name(&in_order).name;
        (!name.is_empty()).then_some(name)
    }
}

/// Which entries of a directory sector to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    /// Every entry (the sector is unallocated or slack: even entries not
    /// marked deleted are remnants).
    All,
    /// Entries marked deleted only (the sector may be a live directory).
    DeletedOnly,
}

/// Parses consecutive directory sectors, carrying long-name pieces from
/// one sector to the next when they are adjacent.
#[derive(Debug, Default)]
pub struct FatSectorParser {
    lfn: Option<LongName>,
    next_offset: Option<u64>,
}

impl FatSectorParser {
    /// Parse the directory sector at media offset `at`, calling `out` for
    /// each entry to report.
    pub fn sector(
        &mut self,
        sector: &[u8],
        at: u64,
        geometry: Option<&FatGeometry>,
        report: Report,
        out: &mut dyn FnMut(MetaRecord),
    ) {
        if self.next_offset != Some(at) {
            self.lfn = None;
        }
        self.next_offset = Some(at + sector.len() as u64);
        let fat32 = geometry.is_none_or(|g| g.bits == 32);
        let last = geometry.map(|g| g.last_cluster);
        for (k, s) in sector.chunks_exact(32).enumerate() {
            let slot_at = at + 32 * k as u64;
            match classify(s, last, fat32) {
                Slot::LongName => {
                    let Some(d) = Dentry::at(s) else { continue };
                    let piece = d.lfn_units();
                    let checksum = d.lfn_checksum();
                    // The last part of a name comes first on disk, flagged
                    // 0x40; deleted pieces lost their ordinals (0xE5).
                    let starts = s[0] != DELETED && s[0] & 0x40 != 0;
                    match self.lfn.as_mut() {
                        Some(l) if !starts && l.checksum == checksum => l.pieces.push(piece),
                        _ => {
                            self.lfn = Some(LongName {
                                pieces: vec![piece],
                                checksum,
                                start: slot_at,
                            })
                        }
                    }
                }
                Slot::Short { dot } => {
                    let lfn = self.lfn.take();
                    let Some(d) = Dentry::at(s) else { continue };
                    if dot || s[11] & ATTR_VOLUME != 0 {
                        continue;
                    }
                    let deleted = s[0] == DELETED;
                    if report == Report::DeletedOnly && !deleted {
                        continue;
                    }
                    let long = lfn.as_ref().and_then(|l| l.name_for(&s[..11]));
                    let start = match (&long, &lfn) {
                        (Some(_), Some(l)) => l.start,
                        _ => slot_at,
                    };
                    let note = match (&lfn, &long) {
                        (Some(_), None) => {
                            Some("long-name slots before the entry do not match it".to_string())
                        }
                        _ => None,
                    };
                    let cluster = u64::from(d.cluster(fat32));
                    let is_dir = d.attr() & ATTR_DIRECTORY != 0;
                    out(MetaRecord {
                        record: "fat-dentry",
                        offset: start,
                        length: slot_at + 32 - start,
                        name: long.unwrap_or_else(|| dir::short_name(&d)),
                        kind: if is_dir { "directory" } else { "file" },
                        size: u64::from(d.size()),
                        deleted,
                        times: [
                            dos_secs(d.wdate(), d.wtime()),
                            dos_secs(d.adate(), 0),
                            None,
                            dos_secs(d.cdate(), d.ctime()),
                        ],
                        first_cluster: (cluster >= 2).then_some(cluster),
                        data: NtfsData::None,
                        meta_addr: geometry
                            .and_then(|g| g.inode(slot_at))
                            .map(|i| i.to_string()),
                        note,
                    });
                }
                Slot::Empty | Slot::Garbage => self.lfn = None,
            }
        }
    }
}

// --------------------------------------------------------------- NTFS ---

/// NTFS geometry for placing a record's runs.
#[derive(Debug, Clone)]
pub struct NtfsGeometry {
    /// Media offset of the volume.
    pub base: u64,
    /// Bytes per cluster.
    pub cluster_size: u64,
    /// Bytes per MFT record.
    pub record_size: u64,
    /// Clusters in the volume.
    pub total_clusters: u64,
}

/// Whether a sector starts a `FILE` record.
pub fn is_file_record_start(sector: &[u8]) -> bool {
    sector.len() >= 48 && &sector[..4] == b"FILE"
}

/// The record size a `FILE` header declares through its update sequence
/// count (one entry per 512-byte sector, plus the sequence number).
pub fn declared_record_size(head: &[u8]) -> Option<u64> {
    if head.len() < 8 {
        return None;
    }
    let count = u64::from(le16(head, 6));
    let size = count.checked_sub(1)? * 512;
    matches!(size, 1024 | 2048 | 4096).then_some(size)
}

fn secs(t: Option<caseload_fs::Timestamp>) -> Secs {
    t.map(|t| t.secs)
}

/// Parse a `FILE` record found at media offset `at` with `caseload-fs`'s
/// record parsers (fixups, header, attributes, run list). `None` when it
/// is not a usable base record (torn, extension record, no `$FILE_NAME`).
/// Attributes before a damaged one are kept, and the damage noted.
pub fn parse_file_record(
    mut rec: Vec<u8>,
    at: u64,
    geometry: Option<&NtfsGeometry>,
) -> Option<MetaRecord> {
    use caseload_fs::ntfs::filename;
    use caseload_fs::ntfs::mft::{
        self, ATTR_DATA, ATTR_FILE_NAME, ATTR_FLAG_COMPRESSED, ATTR_FLAG_ENCRYPTED,
        ATTR_STANDARD_INFORMATION, Body,
    };
    mft::apply_fixups(&mut rec, b"FILE").ok()?;
    let header = mft::parse_header(&rec).ok()?;
    if header.base_record() != 0 {
        return None;
    }
    let attrs = mft::parse_attributes(&rec, &header);
    let mut times: [Secs; 4] = [None; 4];
    let mut fn_times: [Secs; 4] = [None; 4];
    let mut name: Option<(u8, String)> = None;
    let mut size = 0u64;
    let mut data = NtfsData::None;
    for a in &attrs.list {
        match a.ty {
            ATTR_STANDARD_INFORMATION => {
                if let Some(v) = a.resident().filter(|v| v.len() >= 32) {
                    let t = |o: usize| secs(filename::nt_time(le64(v, o)));
                    times = [t(8), t(24), t(16), t(0)];
                }
            }
            ATTR_FILE_NAME => {
                if let Some(f) = a.resident().and_then(|v| filename::parse(v, at).ok()) {
                    // Prefer Win32 names over DOS 8.3 ones.
                    let rank = u8::from(f.namespace != filename::NAMESPACE_DOS);
                    if name.as_ref().is_none_or(|(r, _)| rank > *r) {
                        name = Some((rank, f.name));
                        fn_times = [
                            secs(f.times.modified),
                            secs(f.times.accessed),
                            secs(f.times.changed),
                            secs(f.times.created),
                        ];
                    }
                }
            }
            ATTR_DATA if a.name.is_empty() => match &a.body {
                _ if a.flags & (ATTR_FLAG_COMPRESSED | ATTR_FLAG_ENCRYPTED) != 0 => {
                    data = NtfsData::Encoded;
                    size = match &a.body {
                        Body::NonResident(nr) => nr.data_size,
                        Body::Resident(_) => 0,
                    };
                }
                Body::Resident(v) => {
                    size = v.len() as u64;
                    data = NtfsData::Resident(v.clone());
                }
                Body::NonResident(nr) if nr.start_vcn == 0 => {
                    size = nr.data_size;
                    let total = geometry.map_or(u64::MAX, |g| g.total_clusters);
                    let (runs, err) = mft::decode_runs(&nr.runs, 0, total);
                    data = match err {
                        None => NtfsData::Runs(runs.iter().map(|r| (r.lcn, r.clusters)).collect()),
                        Some(_) => NtfsData::None,
                    };
                }
                Body::NonResident(_) => {}
            },
            _ => {}
        }
    }
    let (_, name) = name?;
    if times.iter().all(Option::is_none) {
        times = fn_times;
    }
    let directory = header.is_directory();
    Some(MetaRecord {
        record: "mft-record",
        offset: at,
        length: rec.len() as u64,
        name,
        kind: if directory { "directory" } else { "file" },
        size: if directory { 0 } else { size },
        deleted: !header.in_use(),
        times,
        first_cluster: None,
        data: if directory { NtfsData::None } else { data },
        meta_addr: header.number.map(|n| n.to_string()),
        note: attrs
            .error
            .map(|e| format!("record damaged after its first attributes: {e}")),
    })
}

/// Read the `$DATA` runs of MFT record `number` (the MFT itself, record
/// 0, or `$Bitmap`, record 6) from a volume, following the MFT's first
/// run (records 0 to 15 always live there).
pub fn system_file_runs(
    geometry: &NtfsGeometry,
    mft_lcn: u64,
    number: u64,
    read: &mut dyn FnMut(u64, &mut [u8]) -> bool,
) -> Option<Vec<(Option<u64>, u64)>> {
    let rs = usize::try_from(geometry.record_size).ok()?;
    let at =
        geometry.base + mft_lcn.checked_mul(geometry.cluster_size)? + number * geometry.record_size;
    let mut rec = vec![0u8; rs];
    if !read(at, &mut rec) || &rec[..4] != b"FILE" {
        return None;
    }
    match parse_file_record(rec, at, Some(geometry))?.data {
        NtfsData::Runs(r) => Some(r),
        _ => None,
    }
}

/// NTFS boot sector fields: (geometry, MFT cluster).
pub fn ntfs_boot(base: u64, boot: &[u8]) -> Option<(NtfsGeometry, u64)> {
    if boot.len() < 512 || &boot[3..11] != b"NTFS    " {
        return None;
    }
    let bps = u64::from(le16(boot, 11));
    let spc_raw = boot[13];
    let spc = if spc_raw > 0x80 {
        1u64 << (256 - u32::from(spc_raw))
    } else {
        u64::from(spc_raw)
    };
    let cluster_size = bps.checked_mul(spc)?;
    let total_sectors = le64(boot, 40);
    let mft_lcn = le64(boot, 48);
    let raw = boot[64] as i8;
    let record_size = if raw < 0 {
        1u64 << u32::from(raw.unsigned_abs())
    } else {
        u64::try_from(raw).ok()?.checked_mul(cluster_size)?
    };
    if !matches!(bps, 512 | 1024 | 2048 | 4096)
        || cluster_size == 0
        || !matches!(record_size, 1024 | 2048 | 4096)
    {
        return None;
    }
    Some((
        NtfsGeometry {
            base,
            cluster_size,
            record_size,
            total_clusters: total_sectors.checked_mul(bps)? / cluster_size,
        },
        mft_lcn,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &[u8; 11], attr: u8, cluster: u16, size: u32) -> [u8; 32] {
        let mut e = [0u8; 32];
        e[..11].copy_from_slice(name);
        e[11] = attr;
        // 2004-02-14 10:20:30.
        let date: u16 = ((2004 - 1980) << 9) | (2 << 5) | 14;
        let time: u16 = (10 << 11) | (20 << 5) | 15;
        e[14..16].copy_from_slice(&time.to_le_bytes());
        e[16..18].copy_from_slice(&date.to_le_bytes());
        e[18..20].copy_from_slice(&date.to_le_bytes());
        e[22..24].copy_from_slice(&time.to_le_bytes());
        e[24..26].copy_from_slice(&date.to_le_bytes());
        e[26..28].copy_from_slice(&cluster.to_le_bytes());
        e[28..32].copy_from_slice(&size.to_le_bytes());
        e
    }

    fn lfn(seq: u8, checksum: u8, text: &str) -> [u8; 32] {
        let mut e = [0xFFu8; 32];
        e[0] = seq;
        e[11] = ATTR_LFN;
        e[12] = 0;
        e[13] = checksum;
        e[26] = 0;
        e[27] = 0;
        let mut units: Vec<u16> = text.encode_utf16().collect();
        if units.len() < 13 {
            units.push(0);
        }
        for (i, &o) in [1usize, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30]
            .iter()
            .enumerate()
        {
            if let Some(&u) = units.get(i) {
                e[o..o + 2].copy_from_slice(&u.to_le_bytes());
            }
        }
        e
    }

    #[test]
    fn deleted_entries_with_long_names_are_recovered() {
        let short = *b"\xE5ONGNA~1TXT";
        let ck = dir::lfn_checksum(b"\xE5ONGNA~1TXT");
        let mut sector = vec![0u8; 512];
        sector[..32].copy_from_slice(&entry(b".          ", 0x10, 5, 0));
        sector[32..64].copy_from_slice(&lfn(0xE5, ck, "longname.txt"));
        sector[64..96].copy_from_slice(&entry(&short, 0x20, 7, 3000));
        sector[96..128].copy_from_slice(&entry(b"LIVE    TXT", 0x20, 9, 10));
        assert!(is_dir_sector(&sector, None));
        let mut got = Vec::new();
        let mut p = FatSectorParser::default();
        p.sector(&sector, 4096, None, Report::DeletedOnly, &mut |r| {
            got.push(r)
        });
        assert_eq!(got.len(), 1);
        let r = &got[0];
        assert_eq!(r.name, "longname.txt");
        assert_eq!((r.offset, r.length), (4096 + 32, 64));
        assert_eq!((r.size, r.first_cluster, r.deleted), (3000, Some(7), true));
        assert_eq!(r.times[0], Some(1_076_754_030));
        let mut all = Vec::new();
        p.sector(&sector, 8192, None, Report::All, &mut |r| all.push(r));
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].name, "LIVE.TXT");
        // A deleted directory that records its byte count (as DFTT #6's
        // `dir1` does) still makes a directory sector.
        sector[128..160].copy_from_slice(&entry(b"\xE5IR1       ", 0x10, 13, 1024));
        assert!(is_dir_sector(&sector, None));
        sector[128..160].copy_from_slice(&entry(b"\xE5IR1       ", 0x10, 13, 1000));
        assert!(!is_dir_sector(&sector, None));
    }

    #[test]
    fn deleted_long_names_match_through_their_lost_first_byte() {
        // The checksum was taken over `SEE201~2JPG`; deletion made it
        // `\xE5EE201~2JPG`.
        let ck = dir::lfn_checksum(b"SEE201~2JPG");
        let mut sector = vec![0u8; 512];
        sector[..32].copy_from_slice(&lfn(0xE5, ck, "8.jpg"));
        sector[32..64].copy_from_slice(&lfn(0xE5, ck, "See 2016-06-0"));
        sector[64..96].copy_from_slice(&entry(b"\xE5EE201~2JPG", 0x20, 7, 91602));
        let mut got = Vec::new();
        FatSectorParser::default()
            .sector(&sector, 0, None, Report::DeletedOnly, &mut |r| got.push(r));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].name, "See 2016-06-08.jpg");
        assert_eq!(got[0].note, None);
        // Slots of another name do not attach.
        let other = dir::lfn_checksum(b"TEE201~2JPG");
        sector[..32].copy_from_slice(&lfn(0xE5, other, "8.jpg"));
        sector[32..64].copy_from_slice(&lfn(0xE5, other, "See 2016-06-0"));
        let mut got = Vec::new();
        FatSectorParser::default()
            .sector(&sector, 0, None, Report::DeletedOnly, &mut |r| got.push(r));
        assert_eq!(got[0].name, "_EE201~2.JPG");
    }

    #[test]
    fn noise_text_and_zeros_are_not_directory_sectors() {
        assert!(!is_dir_sector(&[0u8; 512], None));
        let text = b"The quick brown fox jumps over the lazy dog. ".repeat(12);
        assert!(!is_dir_sector(&text[..512], None));
        let noise = crate::noise::noise(512, 0x1234_5678);
        assert!(!is_dir_sector(&noise, None));
    }

    /// A minimal FILE record: $STANDARD_INFORMATION, $FILE_NAME, resident
    /// $DATA, with a correct update sequence.
    pub(crate) fn file_record(name: &str, data: &[u8], in_use: bool) -> Vec<u8> {
        let mut r = vec![0u8; 1024];
        r[..4].copy_from_slice(b"FILE");
        r[4..6].copy_from_slice(&48u16.to_le_bytes());
        r[6..8].copy_from_slice(&3u16.to_le_bytes());
        r[20..22].copy_from_slice(&56u16.to_le_bytes());
        r[22..24].copy_from_slice(&(u16::from(in_use)).to_le_bytes());
        r[44..48].copy_from_slice(&77u32.to_le_bytes());
        let mut off = 56;
        let mut attr = |ty: u32, value: &[u8], r: &mut Vec<u8>| {
            let len = (24 + value.len()).div_ceil(8) * 8;
            r[off..off + 4].copy_from_slice(&ty.to_le_bytes());
            r[off + 4..off + 8].copy_from_slice(&(len as u32).to_le_bytes());
            r[off + 16..off + 20].copy_from_slice(&(value.len() as u32).to_le_bytes());
            r[off + 20..off + 22].copy_from_slice(&24u16.to_le_bytes());
            r[off + 24..off + 24 + value.len()].copy_from_slice(value);
            off += len;
        };
        let mut si = vec![0u8; 48];
        si[8..16].copy_from_slice(&(131_000_000_000_000_000u64).to_le_bytes());
        attr(0x10, &si, &mut r);
        let units: Vec<u16> = name.encode_utf16().collect();
        let mut fname = vec![0u8; 66 + 2 * units.len()];
        fname[64] = units.len() as u8;
        fname[65] = 1;
        for (i, u) in units.iter().enumerate() {
            fname[66 + 2 * i..68 + 2 * i].copy_from_slice(&u.to_le_bytes());
        }
        attr(0x30, &fname, &mut r);
        attr(0x80, data, &mut r);
        r[off..off + 4].copy_from_slice(&0xFFFF_FFFFu32.to_le_bytes());
        let used = (off + 8) as u32;
        r[24..28].copy_from_slice(&used.to_le_bytes());
        r[28..32].copy_from_slice(&1024u32.to_le_bytes());
        // Update sequence: number 0x0101 at the end of both sectors.
        r[48..50].copy_from_slice(&[1, 1]);
        for s in 1..=2 {
            let end = s * 512;
            let saved = [r[end - 2], r[end - 1]];
            r[48 + 2 * s..50 + 2 * s].copy_from_slice(&saved);
            r[end - 2..end].copy_from_slice(&[1, 1]);
        }
        r
    }

    #[test]
    fn file_records_parse_and_torn_ones_do_not() {
        let r = file_record("notes.txt", b"hello resident", false);
        assert!(is_file_record_start(&r));
        assert_eq!(declared_record_size(&r), Some(1024));
        let m = parse_file_record(r.clone(), 123, None).unwrap();
        assert_eq!(m.name, "notes.txt");
        assert!(m.deleted);
        assert_eq!(m.size, 14);
        assert_eq!(m.data, NtfsData::Resident(b"hello resident".to_vec()));
        assert_eq!(m.meta_addr.as_deref(), Some("77"));
        assert_eq!(m.times[0], Some(1_455_526_400));
        let mut torn = r;
        torn[1022] ^= 1;
        assert!(parse_file_record(torn, 0, None).is_none());
    }
}
