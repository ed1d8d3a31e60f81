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

const ATTR_VOLUME: u8 = 0x08;
const ATTR_DIRECTORY: u8 = 0x10;
const ATTR_LFN: u8 = 0x0F;
const DELETED: u8 = 0xE5;

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

fn is_date(x: u16) -> bool {
    let day = x & 0x1f;
    let mon = (x >> 5) & 0x0f;
    (1..=31).contains(&day) && (1..=12).contains(&mon)
}

fn is_time(x: u16) -> bool {
    (x & 0x1f) <= 29 && ((x >> 5) & 0x3f) <= 59 && (x >> 11) <= 23
}

/// Characters allowed in a stored 8.3 name (TSK's test).
fn is_83_char(c: u8) -> bool {
    !(c < 0x20
        || c == 0x22
        || (0x2a..=0x2c).contains(&c)
        || c == 0x2e
        || c == 0x2f
        || (0x3a..=0x3f).contains(&c)
        || (0x5b..=0x5d).contains(&c)
        || c == 0x7c)
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
    if s.iter().all(|&b| b == 0) {
        return Slot::Empty;
    }
    let attr = s[11];
    if attr & ATTR_LFN == ATTR_LFN && attr & 0xC0 == 0 {
        let seq = s[0];
        let ok_seq = seq == DELETED || (seq & 0x80 == 0 && seq & 0x1f != 0 && seq & 0x3f <= 20);
        // Type 0 and first cluster 0 in every long-name slot.
        return if ok_seq && s[12] == 0 && le16(s, 26) == 0 {
            Slot::LongName
        } else {
            Slot::Garbage
        };
    }
    if s[0] == 0 || attr & 0xC0 != 0 || s[12] & !0x18 != 0 {
        return Slot::Garbage;
    }
    if attr & ATTR_VOLUME != 0 && attr & (ATTR_DIRECTORY | 0x01 | 0x20) != 0 {
        return Slot::Garbage;
    }
    let (ctime, cdate, adate, wtime, wdate) = (
        le16(s, 14),
        le16(s, 16),
        le16(s, 18),
        le16(s, 22),
        le16(s, 24),
    );
    if (ctime != 0 && !is_time(ctime))
        || (wtime != 0 && !is_time(wtime))
        || (cdate != 0 && !is_date(cdate))
        || (adate != 0 && !is_date(adate))
        || (wdate != 0 && !is_date(wdate))
        || s[13] > 199
    {
        return Slot::Garbage;
    }
    // An entry always has a modification date (TSK's "all zero" test,
    // made strict: unallocated sectors hold much noise).
    if wdate == 0 {
        return Slot::Garbage;
    }
    let cluster = u64::from(le16(s, 26))
        | if fat32 {
            u64::from(le16(s, 20)) << 16
        } else {
            0
        };
    if !fat32 && le16(s, 20) != 0 {
        return Slot::Garbage;
    }
    if let Some(last) = last_cluster
        && cluster > last
    {
        return Slot::Garbage;
    }
    let size = le32(s, 28);
    // Directories record size 0, but some writers store their byte count
    // (DFTT #6's deleted `dir1` says 1024), which TSK ignores; only a
    // count that is no whole number of entries marks noise.
    if attr & ATTR_DIRECTORY != 0 && !size.is_multiple_of(32) {
        return Slot::Garbage;
    }
    if size > 0 && cluster == 0 {
        return Slot::Garbage;
    }
    let dot =
        attr & ATTR_DIRECTORY != 0 && (&s[..11] == b".          " || &s[..11] == b"..         ");
    if !dot {
        let name = &s[..11];
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

/// FAT date and time as TSK converts them (wall clock read as UTC).
fn dos_time(date: u16, time: u16) -> Secs {
    if !is_date(date) {
        return None;
    }
    let day = i64::from(date & 0x1f);
    let mon = i64::from((date >> 5) & 0x0f);
    let year = 1980 + i64::from(date >> 9);
    let sec = i64::from(time & 0x1f) * 2;
    let min = i64::from((time >> 5) & 0x3f);
    let hour = i64::from(time >> 11);
    // Days from civil (Howard Hinnant).
    let y = if mon <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if mon > 2 { mon - 3 } else { mon + 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hour.min(23) * 3600 + min.min(59) * 60 + sec.min(59))
}

fn lfn_checksum(name11: &[u8]) -> u8 {
    name11
        .iter()
        .fold(0u8, |sum, &c| sum.rotate_right(1).wrapping_add(c))
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
    fn units(s: &[u8]) -> [u16; 13] {
        let mut u = [0u16; 13];
        for (i, &o) in [1usize, 3, 5, 7, 9, 14, 16, 18, 20, 22, 24, 28, 30]
            .iter()
            .enumerate()
        {
            u[i] = le16(s, o);
        }
        u
    }

    /// The name, when the pieces belong to the short entry `name11`.
    fn name_for(&self, name11: &[u8]) -> Option<String> {
        if self.pieces.is_empty() {
            return None;
        }
        let name = self.text()?;
        if lfn_checksum(name11) == self.checksum {
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
        (lfn_checksum(&restored) == self.checksum).then_some(name)
    }

    /// The long name the pieces spell.
    fn text(&self) -> Option<String> {
        let mut units: Vec<u16> = self
            .pieces
            .iter()
            .rev()
            .flat_map(|p| p.iter().copied())
            .collect();
        if let Some(end) = units.iter().position(|&u| u == 0) {
            units.truncate(end);
        }
        while units.last() == Some(&0xFFFF) {
            units.pop();
        }
        let name = String::from_utf16(&units).ok()?;
        (!name.is_empty()).then_some(name)
    }
}

/// The 8.3 name as TSK shows it (deleted first character as `_`).
fn short_name(s: &[u8]) -> String {
    let lower_base = s[12] & 0x08 != 0;
    let lower_ext = s[12] & 0x10 != 0;
    let mut out = String::new();
    for (i, &c) in s[..8].iter().enumerate() {
        if c == b' ' || c == 0 {
            continue;
        }
        let c = if i == 0 && c == DELETED {
            b'_'
        } else if i == 0 && c == 0x05 {
            DELETED
        } else {
            c
        };
        let c = if lower_base {
            c.to_ascii_lowercase()
        } else {
            c
        };
        out.push(char::from(c));
    }
    let ext: Vec<u8> = s[8..11]
        .iter()
        .copied()
        .filter(|&c| c != b' ' && c != 0)
        .collect();
    if !ext.is_empty() {
        out.push('.');
        for c in ext {
            out.push(char::from(if lower_ext {
                c.to_ascii_lowercase()
            } else {
                c
            }));
        }
    }
    out
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
                    let piece = LongName::units(s);
                    let checksum = s[13];
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
                    let cluster = u64::from(le16(s, 26))
                        | if fat32 {
                            u64::from(le16(s, 20)) << 16
                        } else {
                            0
                        };
                    let is_dir = s[11] & ATTR_DIRECTORY != 0;
                    out(MetaRecord {
                        record: "fat-dentry",
                        offset: start,
                        length: slot_at + 32 - start,
                        name: long.unwrap_or_else(|| short_name(s)),
                        kind: if is_dir { "directory" } else { "file" },
                        size: u64::from(le32(s, 28)),
                        deleted,
                        times: [
                            dos_time(le16(s, 24), le16(s, 22)),
                            dos_time(le16(s, 18), 0),
                            None,
                            dos_time(le16(s, 16), le16(s, 14)),
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

/// Undo the update-sequence protection of a record in place.
fn fixup(buf: &mut [u8]) -> Result<(), String> {
    let usa = usize::from(le16(buf, 4));
    let count = usize::from(le16(buf, 6));
    if count < 2 || usa < 42 || usa + 2 * count > buf.len() || (count - 1) * 512 != buf.len() {
        return Err("update sequence array does not fit the record".into());
    }
    let usn = [buf[usa], buf[usa + 1]];
    for i in 1..count {
        let end = i * 512;
        if buf[end - 2..end] != usn {
            return Err(format!("update sequence mismatch in sector {i}"));
        }
        buf[end - 2] = buf[usa + 2 * i];
        buf[end - 1] = buf[usa + 2 * i + 1];
    }
    Ok(())
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

fn nt_time(t: u64) -> Secs {
    // 100 ns ticks since 1601-01-01; 0 means absent.
    if t == 0 {
        return None;
    }
    let secs = i64::try_from(t / 10_000_000).ok()?;
    Some(secs - 11_644_473_600)
}

/// Decode a run list into (first cluster or sparse, count).
fn decode_runs(
    mut b: &[u8],
    total_clusters: Option<u64>,
) -> Result<Vec<(Option<u64>, u64)>, String> {
    let mut runs = Vec::new();
    let mut lcn: i64 = 0;
    while let Some(&h) = b.first() {
        if h == 0 {
            break;
        }
        let (ls, os) = (usize::from(h & 15), usize::from(h >> 4));
        if ls == 0 || ls > 8 || os > 8 || b.len() < 1 + ls + os {
            return Err("malformed run list".into());
        }
        let mut len = 0u64;
        for (i, &x) in b[1..1 + ls].iter().enumerate() {
            len |= u64::from(x) << (8 * i);
        }
        if os == 0 {
            runs.push((None, len));
        } else {
            let mut off: i64 = 0;
            for (i, &x) in b[1 + ls..1 + ls + os].iter().enumerate() {
                off |= i64::from(x) << (8 * i);
            }
            let shift = 64 - 8 * os as u32;
            off = if shift < 64 {
                (off << shift) >> shift
            } else {
                off
            };
            lcn = lcn.checked_add(off).ok_or("run offset overflows")?;
            let first = u64::try_from(lcn).map_err(|_| "negative cluster in run list")?;
            if let Some(t) = total_clusters
                && first.checked_add(len).is_none_or(|e| e > t)
            {
                return Err("run lies outside the volume".into());
            }
            runs.push((Some(first), len));
        }
        if runs.len() > 65_536 {
            return Err("run list too long".into());
        }
        b = &b[1 + ls + os..];
    }
    Ok(runs)
}

/// Parse a `FILE` record found at media offset `at`. `None` when it is not
/// a usable base record (torn, extension record, no `$FILE_NAME`).
pub fn parse_file_record(
    mut rec: Vec<u8>,
    at: u64,
    geometry: Option<&NtfsGeometry>,
) -> Option<MetaRecord> {
    fixup(&mut rec).ok()?;
    let first_attr = usize::from(le16(&rec, 20));
    let flags = le16(&rec, 22);
    let used = usize::try_from(le32(&rec, 24)).ok()?;
    let base_ref = le64(&rec, 32);
    if used > rec.len() || first_attr < 42 || first_attr >= used || base_ref & 0xFFFF_FFFF_FFFF != 0
    {
        return None;
    }
    let number = (first_attr >= 48).then(|| le32(&rec, 44));
    let mut times: [Secs; 4] = [None; 4];
    let mut fn_times: [Secs; 4] = [None; 4];
    let mut name: Option<(u8, String)> = None;
    let mut size = 0u64;
    let mut data = NtfsData::None;
    let mut off = first_attr;
    let mut guard = 0;
    while off + 16 <= used && guard < 512 {
        guard += 1;
        let ty = le32(&rec, off);
        if ty == 0xFFFF_FFFF {
            break;
        }
        let len = usize::try_from(le32(&rec, off + 4)).ok()?;
        if len < 16 || off + len > used {
            return None;
        }
        let a = &rec[off..off + len];
        let non_resident = a[8] != 0;
        let name_len = usize::from(a[9]);
        let aflags = le16(a, 12);
        let resident_value = || -> Option<&[u8]> {
            if non_resident || a.len() < 24 {
                return None;
            }
            let vlen = usize::try_from(le32(a, 16)).ok()?;
            let voff = usize::from(le16(a, 20));
            a.get(voff..voff.checked_add(vlen)?)
        };
        match ty {
            0x10 => {
                if let Some(v) = resident_value()
                    && v.len() >= 32
                {
                    times = [
                        nt_time(le64(v, 8)),
                        nt_time(le64(v, 24)),
                        nt_time(le64(v, 16)),
                        nt_time(le64(v, 0)),
                    ];
                }
            }
            0x30 => {
                if let Some(v) = resident_value()
                    && v.len() >= 66
                {
                    let n = usize::from(v[64]);
                    let ns = v[65];
                    if let Some(units) = v.get(66..66 + 2 * n) {
                        let u: Vec<u16> = units
                            .chunks_exact(2)
                            .map(|c| u16::from_le_bytes([c[0], c[1]]))
                            .collect();
                        let text = String::from_utf16_lossy(&u);
                        // Prefer Win32 names over DOS 8.3 ones.
                        let rank = |ns: u8| if ns == 2 { 0 } else { 1 };
                        if name.as_ref().is_none_or(|(r, _)| rank(ns) > *r) {
                            name = Some((rank(ns), text));
                            fn_times = [
                                nt_time(le64(v, 16)),
                                nt_time(le64(v, 32)),
                                nt_time(le64(v, 24)),
                                nt_time(le64(v, 8)),
                            ];
                        }
                    }
                }
            }
            0x80 if name_len == 0 => {
                if aflags & 0x4001 != 0 {
                    data = NtfsData::Encoded;
                    size = if non_resident && a.len() >= 56 {
                        le64(a, 48)
                    } else {
                        0
                    };
                } else if let Some(v) = resident_value() {
                    size = v.len() as u64;
                    data = NtfsData::Resident(v.to_vec());
                } else if non_resident && a.len() >= 64 {
                    let start_vcn = le64(a, 16);
                    let runs_at = usize::from(le16(a, 32));
                    size = le64(a, 48);
                    if start_vcn == 0 && runs_at < a.len() {
                        match decode_runs(&a[runs_at..], geometry.map(|g| g.total_clusters)) {
                            Ok(r) => data = NtfsData::Runs(r),
                            Err(_) => data = NtfsData::None,
                        }
                    }
                }
            }
            _ => {}
        }
        off += len;
    }
    let (_, name) = name?;
    if times.iter().all(Option::is_none) {
        times = fn_times;
    }
    let directory = flags & 0x0002 != 0;
    Some(MetaRecord {
        record: "mft-record",
        offset: at,
        length: rec.len() as u64,
        name,
        kind: if directory { "directory" } else { "file" },
        size: if directory { 0 } else { size },
        deleted: flags & 0x0001 == 0,
        times,
        first_cluster: None,
        data: if directory { NtfsData::None } else { data },
        meta_addr: number.map(|n| n.to_string()),
        note: None,
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
        let ck = lfn_checksum(b"\xE5ONGNA~1TXT");
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
        let ck = lfn_checksum(b"SEE201~2JPG");
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
        let other = lfn_checksum(b"TEE201~2JPG");
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

    #[test]
    fn run_lists_decode_with_signed_offsets() {
        // 0x21: 1-byte length, 2-byte offset. Runs: 16 @ 0x1000, 8 @ -0x100
        // relative, then a sparse run of 4.
        let b = [0x21, 16, 0x00, 0x10, 0x21, 8, 0x00, 0xFF, 0x01, 4, 0x00];
        let r = decode_runs(&b, Some(1 << 20)).unwrap();
        assert_eq!(r, vec![(Some(0x1000), 16), (Some(0x0F00), 8), (None, 4)]);
        assert!(decode_runs(&[0x21, 16, 0x00], None).is_err());
        assert!(decode_runs(&[0x11, 16, 0x7F], Some(100)).is_err());
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
        assert_eq!(m.times[0], nt_time(131_000_000_000_000_000));
        assert_eq!(nt_time(131_000_000_000_000_000), Some(1_455_526_400));
        let mut torn = r;
        torn[1022] ^= 1;
        assert!(parse_file_record(torn, 0, None).is_none());
    }
}
