//! Volume systems: MBR (with extended-partition chains), GPT, or none.
//!
//! Every partition is reported with its offset, length, type and the file
//! system detected in it, including partitions that are damaged (entries
//! outside the disk, overlapping, looping extended chains); the damage is
//! recorded as [`ProcessingError`]s on the partition or the volume system.
//! Partition tables and extended containers are listed separately, as
//! `mmls` lists them, so unallocated disk areas can be derived.

use std::collections::HashSet;
use std::fmt;

use crate::bytes::{decode_utf16, u32_at, u64_at, utf16_units};
use crate::detect::{FsKind, detect_filesystem};
use crate::error::{ErrorKind, FsError, ProcessingError};
use crate::read::{ReadAt, read_full};

/// Which partitioning scheme the disk uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// DOS/MBR partition table, possibly with extended partitions.
    Mbr,
    /// GUID partition table.
    Gpt,
    /// No partition table: the whole source is one volume (a file system at
    /// offset 0, or unrecognised bytes).
    None,
}

/// A partition's type as its table records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionType {
    /// MBR partition type byte.
    Mbr(u8),
    /// GPT partition entry details.
    Gpt {
        /// Partition type GUID, in its usual text form.
        type_guid: String,
        /// Unique partition GUID.
        unique_guid: String,
        /// Attribute flags.
        attributes: u64,
        /// The entry's name (UTF-16 in the table).
        name: String,
    },
    /// The whole source, when there is no partition table.
    Whole,
}

/// One partition (or the whole unpartitioned source).
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    /// Partition table number (0 = the MBR or GPT, 1.. = extended tables in
    /// the order met) and entry number within it, as `mmls` prints them.
    pub table: usize,
    /// Entry number within its table.
    pub slot: usize,
    /// First sector.
    pub start_sector: u64,
    /// Length in sectors, as the table says.
    pub sector_count: u64,
    /// Absolute byte offset on the source.
    pub offset: u64,
    /// Length in bytes, clipped to the end of the source.
    pub length: u64,
    /// Type from the table.
    pub ptype: PartitionType,
    /// Human-readable type (`mmls` style).
    pub description: String,
    /// Whether the partition is a logical one inside an extended partition.
    pub logical: bool,
    /// File system detected at the partition's start.
    pub filesystem: FsKind,
    /// Problems with this entry.
    pub errors: Vec<ProcessingError>,
}

impl Partition {
    /// The slot as `mmls` prints it: `ttt:sss` for MBR, `sss` for GPT.
    pub fn mmls_slot(&self) -> String {
        match self.ptype {
            PartitionType::Gpt { .. } => format!("{:03}", self.slot),
            _ => format!("{:03}:{:03}", self.table, self.slot),
        }
    }
}

/// A metadata area: a partition table, a GPT header, or an extended
/// partition container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableEntry {
    /// First sector.
    pub start_sector: u64,
    /// Length in sectors.
    pub sector_count: u64,
    /// What it is (`Primary Table (#0)`, `Extended Table (#1)`,
    /// `DOS Extended (0x05)`, `GPT Header`, ...).
    pub description: String,
}

/// The partitions of a disk.
#[derive(Debug, Clone, PartialEq)]
pub struct VolumeSystem {
    /// Partitioning scheme.
    pub scheme: Scheme,
    /// Sector size the tables are addressed in.
    pub sector_size: u64,
    /// Length of the source in bytes.
    pub disk_length: u64,
    /// Partitions in the order the tables list them (primary entries, then
    /// logical ones along the extended chain).
    pub partitions: Vec<Partition>,
    /// Tables and extended containers.
    pub tables: Vec<TableEntry>,
    /// Problems not tied to one partition.
    pub errors: Vec<ProcessingError>,
}

impl VolumeSystem {
    /// Runs of sectors `(start, count)` that no partition covers, in disk
    /// order, over the whole source (tables and containers do not count as
    /// covering, as in `mmls`).
    pub fn unallocated(&self) -> Vec<(u64, u64)> {
        let total = self.disk_length / self.sector_size;
        let mut spans: Vec<(u64, u64)> = self
            .partitions
            .iter()
            .filter(|p| p.sector_count > 0)
            .map(|p| {
                (
                    p.start_sector,
                    p.start_sector.saturating_add(p.sector_count),
                )
            })
            .collect();
        spans.sort_unstable();
        let mut out = Vec::new();
        let mut pos = 0u64;
        for (s, e) in spans {
            if s > pos && pos < total {
                out.push((pos, s.min(total) - pos));
            }
            pos = pos.max(e);
        }
        if pos < total {
            out.push((pos, total - pos));
        }
        out
    }
}

/// Name of an MBR partition type, in `mmls`'s wording for the common ones.
pub fn mbr_type_name(t: u8) -> &'static str {
    match t {
        0x00 => "Empty",
        0x01 => "DOS FAT12",
        0x04 => "DOS FAT16 (<32MB)",
        0x05 => "DOS Extended",
        0x06 => "DOS FAT16",
        0x07 => "NTFS / exFAT",
        0x0b => "Win95 FAT32",
        0x0c => "Win95 FAT32 (0x0C)",
        0x0e => "DOS FAT16 (0x0E)",
        0x0f => "Win95 Extended",
        0x11 => "DOS FAT12 (hidden)",
        0x14 => "DOS FAT16 (<32MB, hidden)",
        0x16 => "DOS FAT16 (hidden)",
        0x17 => "NTFS (hidden)",
        0x1b => "Win95 FAT32 (hidden)",
        0x1c => "Win95 FAT32 (0x1C, hidden)",
        0x1e => "DOS FAT16 (0x0E, hidden)",
        0x27 => "Windows Recovery Environment",
        0x42 => "Windows LDM",
        0x82 => "Linux Swap / Solaris x86",
        0x83 => "Linux",
        0x85 => "Linux Extended",
        0x8e => "Linux Logical Volume Manager",
        0xa5 => "FreeBSD",
        0xa6 => "OpenBSD",
        0xa8 => "Mac OS X",
        0xa9 => "NetBSD",
        0xaf => "Mac OS X HFS",
        0xee => "GPT Safety Partition",
        0xef => "EFI File System",
        0xfd => "Linux raid autodetect",
        _ => "Unknown Type",
    }
}

fn is_extended(t: u8) -> bool {
    matches!(t, 0x05 | 0x0f | 0x85)
}

/// Formats a GUID stored in the mixed-endian on-disk layout.
fn guid(b: &[u8]) -> String {
    let mut g = [0u8; 16];
    g.copy_from_slice(&b[..16]);
    format!(
        "{:02X}{:02X}{:02X}{:02X}-{:02X}{:02X}-{:02X}{:02X}-{:02X}{:02X}-{:02X}{:02X}{:02X}{:02X}{:02X}{:02X}",
        g[3],
        g[2],
        g[1],
        g[0],
        g[5],
        g[4],
        g[7],
        g[6],
        g[8],
        g[9],
        g[10],
        g[11],
        g[12],
        g[13],
        g[14],
        g[15]
    )
}

/// Name of a GPT partition type GUID.
pub fn gpt_type_name(type_guid: &str) -> &'static str {
    match type_guid {
        "C12A7328-F81F-11D2-BA4B-00A0C93EC93B" => "EFI System",
        "EBD0A0A2-B9E5-4433-87C0-68B6B72699C7" => "Basic data",
        "E3C9E316-0B5C-4DB8-817D-F92DF00215AE" => "Microsoft reserved",
        "DE94BBA4-06D1-4D40-A16A-BFD50179D6AC" => "Windows recovery",
        "0FC63DAF-8483-4772-8E79-3D69D8477DE4" => "Linux filesystem",
        "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F" => "Linux swap",
        "E6D6D379-F507-44C2-A23C-238F2A3DF928" => "Linux LVM",
        "48465300-0000-11AA-AA11-00306543ECAC" => "Apple HFS+",
        "7C3457EF-0000-11AA-AA11-00306543ECAC" => "Apple APFS",
        "21686148-6449-6E6F-744E-656564454649" => "BIOS boot",
        _ => "Unknown type",
    }
}

impl fmt::Display for PartitionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionType::Mbr(t) => write!(f, "{} ({t:#04x})", mbr_type_name(*t)),
            PartitionType::Gpt { type_guid, .. } => {
                write!(f, "{} ({type_guid})", gpt_type_name(type_guid))
            }
            PartitionType::Whole => f.write_str("whole disk"),
        }
    }
}

fn read_sector<R: ReadAt + ?Sized>(
    src: &R,
    at: u64,
    size: usize,
) -> Result<Option<Vec<u8>>, FsError> {
    let mut buf = vec![0u8; size];
    let n = read_full(src, &mut buf, at).map_err(|e| FsError::io(at, size, e))?;
    Ok((n == size).then_some(buf))
}

/// Most partition tables followed along an extended chain.
const MAX_TABLES: usize = 1024;
/// Most GPT entries read.
const MAX_GPT_ENTRIES: u64 = 16_384;

/// Reads the volume system of a disk: GPT (header and entry CRCs checked,
/// backup header used if the primary is damaged), MBR with extended chains,
/// or none, in which case the whole source is one volume. Every partition
/// gets the file system found at its start. Only I/O errors fail.
pub fn open_volume_system<R: ReadAt + ?Sized>(src: &R) -> Result<VolumeSystem, FsError> {
    let disk_length = src.len();
    let mut vs = VolumeSystem {
        scheme: Scheme::None,
        sector_size: 512,
        disk_length,
        partitions: Vec::new(),
        tables: Vec::new(),
        errors: Vec::new(),
    };
    let Some(s0) = read_sector(src, 0, 512)? else {
        whole_disk(src, &mut vs)?;
        return Ok(vs);
    };
    let signature = s0[510] == 0x55 && s0[511] == 0xAA;
    let entries: Vec<&[u8]> = (0..4).map(|i| &s0[446 + 16 * i..462 + 16 * i]).collect();
    let protective = signature && entries.iter().any(|e| e[4] == 0xEE);
    for ss in [512u64, 4096] {
        let Some(h) = read_sector(src, ss, 512)? else {
            continue;
        };
        if &h[..8] == b"EFI PART" && parse_gpt(src, &mut vs, ss)? {
            if !protective {
                vs.errors.push(ProcessingError::at(
                    ErrorKind::GptCorrupt,
                    0,
                    "GPT without a protective MBR (no 0xEE entry in sector 0)",
                ));
            }
            return Ok(vs);
        }
    }
    if protective {
        vs.errors.push(ProcessingError::at(
            ErrorKind::GptCorrupt,
            0,
            "protective MBR present but no valid GPT header (primary or backup)",
        ));
    }
    // A file-system boot sector at sector 0 is a volume, not a table.
    let fs0 = detect_filesystem(src, 0, disk_length)?;
    let plausible = signature
        && entries.iter().all(|e| e[0] == 0 || e[0] == 0x80)
        && entries
            .iter()
            .any(|e| e[4] != 0 && u32_at(e, 12).unwrap_or(0) != 0);
    if plausible && (fs0 == FsKind::Unknown || protective) {
        parse_mbr(src, &mut vs, &s0)?;
    } else {
        whole_disk(src, &mut vs)?;
    }
    Ok(vs)
}

fn whole_disk<R: ReadAt + ?Sized>(src: &R, vs: &mut VolumeSystem) -> Result<(), FsError> {
    vs.scheme = Scheme::None;
    let fs = detect_filesystem(src, 0, vs.disk_length)?;
    vs.partitions.push(Partition {
        table: 0,
        slot: 0,
        start_sector: 0,
        sector_count: vs.disk_length / 512,
        offset: 0,
        length: vs.disk_length,
        ptype: PartitionType::Whole,
        description: "whole disk".into(),
        logical: false,
        filesystem: fs,
        errors: Vec::new(),
    });
    Ok(())
}

/// Builds a partition from a table entry, checking it against the disk and
/// detecting its file system.
#[allow(clippy::too_many_arguments)]
fn make_partition<R: ReadAt + ?Sized>(
    src: &R,
    vs: &VolumeSystem,
    table: usize,
    slot: usize,
    start: u64,
    count: u64,
    ptype: PartitionType,
    description: String,
    logical: bool,
) -> Result<Partition, FsError> {
    let ss = vs.sector_size;
    let mut errors = Vec::new();
    let offset = start.saturating_mul(ss);
    let end = start.saturating_add(count).saturating_mul(ss);
    let mut filesystem = FsKind::Unknown;
    let length = end.min(vs.disk_length).saturating_sub(offset);
    if start == 0 {
        errors.push(ProcessingError::at(
            ErrorKind::PartitionInvalid,
            0,
            format!("partition {table}:{slot} starts at sector 0, over the partition table"),
        ));
    }
    if offset >= vs.disk_length {
        errors.push(ProcessingError::at(
            ErrorKind::PartitionOutsideDisk,
            offset,
            format!(
                "partition {table}:{slot} starts at sector {start}, past the end of the {}-sector disk",
                vs.disk_length / ss
            ),
        ));
    } else {
        if end > vs.disk_length {
            errors.push(ProcessingError::at(
                ErrorKind::PartitionOutsideDisk,
                offset,
                format!(
                    "partition {table}:{slot} ({count} sectors from {start}) runs past the end of the {}-sector disk",
                    vs.disk_length / ss
                ),
            ));
        }
        filesystem = detect_filesystem(src, offset, length)?;
    }
    Ok(Partition {
        table,
        slot,
        start_sector: start,
        sector_count: count,
        offset,
        length,
        ptype,
        description,
        logical,
        filesystem,
        errors,
    })
}

fn parse_mbr<R: ReadAt + ?Sized>(src: &R, vs: &mut VolumeSystem, s0: &[u8]) -> Result<(), FsError> {
    vs.scheme = Scheme::Mbr;
    vs.sector_size = 512;
    vs.tables.push(TableEntry {
        start_sector: 0,
        sector_count: 1,
        description: "Primary Table (#0)".into(),
    });
    let mut extended: Vec<(u64, u64)> = Vec::new();
    for i in 0..4 {
        let e = &s0[446 + 16 * i..462 + 16 * i];
        let t = e[4];
        let start = u64::from(u32_at(e, 8).unwrap_or(0));
        let count = u64::from(u32_at(e, 12).unwrap_or(0));
        if t == 0 || count == 0 {
            continue;
        }
        let desc = format!("{} ({t:#04x})", mbr_type_name(t));
        if is_extended(t) {
            vs.tables.push(TableEntry {
                start_sector: start,
                sector_count: count,
                description: desc,
            });
            extended.push((start, count));
            continue;
        }
        let p = make_partition(
            src,
            vs,
            0,
            i,
            start,
            count,
            PartitionType::Mbr(t),
            desc,
            false,
        )?;
        vs.partitions.push(p);
    }
    if extended.len() > 1 {
        vs.errors.push(ProcessingError::at(
            ErrorKind::PartitionInvalid,
            0,
            format!(
                "{} extended partitions in the primary table",
                extended.len()
            ),
        ));
    }
    for (ext_start, ext_count) in extended {
        walk_extended(src, vs, ext_start, ext_count)?;
    }
    check_overlaps(vs);
    Ok(())
}

/// Follows an extended-partition chain. Logical entries are relative to
/// their own table; further extended entries are relative to the start of
/// the primary extended partition. A table met twice is a loop.
fn walk_extended<R: ReadAt + ?Sized>(
    src: &R,
    vs: &mut VolumeSystem,
    ext_start: u64,
    ext_count: u64,
) -> Result<(), FsError> {
    let ss = vs.sector_size;
    let mut pending = vec![ext_start];
    let mut seen: HashSet<u64> = HashSet::new();
    let ext_end = ext_start.saturating_add(ext_count);
    while let Some(ebr) = pending.pop() {
        if !seen.insert(ebr) {
            vs.errors.push(ProcessingError::at(
                ErrorKind::ExtendedPartitionLoop,
                ebr.saturating_mul(ss),
                format!("extended partition chain loops back to the table at sector {ebr}"),
            ));
            continue;
        }
        if seen.len() > MAX_TABLES {
            vs.errors.push(ProcessingError::at(
                ErrorKind::ExtendedPartitionLoop,
                ebr.saturating_mul(ss),
                format!("extended partition chain longer than {MAX_TABLES} tables; stopped"),
            ));
            break;
        }
        let at = ebr.saturating_mul(ss);
        let Some(sec) = (if at < vs.disk_length {
            read_sector(src, at, 512)?
        } else {
            None
        }) else {
            vs.errors.push(ProcessingError::at(
                ErrorKind::PartitionOutsideDisk,
                at,
                format!("extended partition table at sector {ebr} is outside the disk"),
            ));
            continue;
        };
        if sec[510] != 0x55 || sec[511] != 0xAA {
            vs.errors.push(ProcessingError::at(
                ErrorKind::PartitionInvalid,
                at,
                format!("extended partition table at sector {ebr} has no 0x55AA signature"),
            ));
            continue;
        }
        let table = vs
            .tables
            .iter()
            .filter(|t| t.description.contains("Table (#"))
            .count();
        vs.tables.push(TableEntry {
            start_sector: ebr,
            sector_count: 1,
            description: format!("Extended Table (#{table})"),
        });
        let mut next = Vec::new();
        for i in 0..4 {
            let e = &sec[446 + 16 * i..462 + 16 * i];
            let t = e[4];
            let rel = u64::from(u32_at(e, 8).unwrap_or(0));
            let count = u64::from(u32_at(e, 12).unwrap_or(0));
            if t == 0 || count == 0 {
                continue;
            }
            let desc = format!("{} ({t:#04x})", mbr_type_name(t));
            if is_extended(t) {
                let abs = ext_start.saturating_add(rel);
                vs.tables.push(TableEntry {
                    start_sector: abs,
                    sector_count: count,
                    description: desc,
                });
                next.push(abs);
            } else {
                let abs = ebr.saturating_add(rel);
                let mut p = make_partition(
                    src,
                    vs,
                    table,
                    i,
                    abs,
                    count,
                    PartitionType::Mbr(t),
                    desc,
                    true,
                )?;
                if abs < ext_start || abs.saturating_add(count) > ext_end {
                    p.errors.push(ProcessingError::at(
                        ErrorKind::PartitionInvalid,
                        abs.saturating_mul(ss),
                        format!(
                            "logical partition {table}:{i} lies outside its extended partition (sectors {ext_start}..{ext_end})"
                        ),
                    ));
                }
                vs.partitions.push(p);
            }
        }
        // Depth-first along the chain, in entry order.
        pending.extend(next.into_iter().rev());
    }
    Ok(())
}

/// Records partitions that overlap one another.
fn check_overlaps(vs: &mut VolumeSystem) {
    let spans: Vec<(u64, u64, usize, usize)> = vs
        .partitions
        .iter()
        .map(|p| {
            (
                p.start_sector,
                p.start_sector.saturating_add(p.sector_count),
                p.table,
                p.slot,
            )
        })
        .collect();
    for (i, p) in vs.partitions.iter_mut().enumerate() {
        for (j, &(s, e, t, sl)) in spans.iter().enumerate() {
            if i != j && p.start_sector < e && s < p.start_sector.saturating_add(p.sector_count) {
                p.errors.push(ProcessingError::at(
                    ErrorKind::PartitionInvalid,
                    p.offset,
                    format!(
                        "partition {}:{} overlaps partition {t}:{sl}",
                        p.table, p.slot
                    ),
                ));
            }
        }
    }
}

/// Tries the GPT with `ss`-byte sectors. Returns false when neither header
/// is usable (the caller then falls back to MBR or no table).
fn parse_gpt<R: ReadAt + ?Sized>(src: &R, vs: &mut VolumeSystem, ss: u64) -> Result<bool, FsError> {
    let sector = usize::try_from(ss).unwrap_or(512);
    let last_lba = (vs.disk_length / ss).saturating_sub(1);
    let mut errors = Vec::new();
    let mut header = None;
    for (lba, which) in [(1u64, "primary"), (last_lba, "backup")] {
        let Some(h) = read_sector(src, lba * ss, sector)? else {
            continue;
        };
        match check_gpt_header(&h, lba) {
            Ok(()) => {
                header = Some(h);
                break;
            }
            Err(e) => errors.push(ProcessingError::at(
                ErrorKind::GptCorrupt,
                lba * ss,
                format!("{which} GPT header: {e}"),
            )),
        }
    }
    let Some(h) = header else {
        vs.errors.extend(errors);
        return Ok(false);
    };
    vs.errors.extend(errors);
    vs.scheme = Scheme::Gpt;
    vs.sector_size = ss;
    let entries_lba = u64_at(&h, 72).unwrap_or(0);
    let count = u64::from(u32_at(&h, 80).unwrap_or(0));
    let esize = u64::from(u32_at(&h, 84).unwrap_or(0));
    let entries_crc = u32_at(&h, 88).unwrap_or(0);
    let first_usable = u64_at(&h, 40).unwrap_or(0);
    let last_usable = u64_at(&h, 48).unwrap_or(0);
    vs.tables.push(TableEntry {
        start_sector: 0,
        sector_count: 1,
        description: "Safety Table".into(),
    });
    vs.tables.push(TableEntry {
        start_sector: u64_at(&h, 24).unwrap_or(1),
        sector_count: 1,
        description: "GPT Header".into(),
    });
    if count > MAX_GPT_ENTRIES || !(128..=4096).contains(&esize) || esize % 8 != 0 {
        vs.errors.push(ProcessingError::at(
            ErrorKind::GptCorrupt,
            ss,
            format!("GPT lists {count} entries of {esize} bytes; not read"),
        ));
        return Ok(true);
    }
    let bytes = count * esize;
    vs.tables.push(TableEntry {
        start_sector: entries_lba,
        sector_count: bytes.div_ceil(ss),
        description: "Partition Table".into(),
    });
    let at = entries_lba.saturating_mul(ss);
    let mut table = vec![0u8; usize::try_from(bytes).unwrap_or(0)];
    let n = read_full(src, &mut table, at).map_err(|e| FsError::io(at, table.len(), e))?;
    if n < table.len() {
        vs.errors.push(ProcessingError::at(
            ErrorKind::GptCorrupt,
            at,
            "GPT entry array runs past the end of the disk",
        ));
        table.truncate(n);
    }
    if crc32fast::hash(&table) != entries_crc {
        vs.errors.push(ProcessingError::at(
            ErrorKind::GptCorrupt,
            at,
            "GPT entry array CRC32 mismatch: entries may be damaged",
        ));
    }
    let esize = usize::try_from(esize).unwrap_or(128);
    for (i, e) in table.chunks_exact(esize).enumerate() {
        if e[..16].iter().all(|&b| b == 0) {
            continue;
        }
        let type_guid = guid(&e[0..16]);
        let unique_guid = guid(&e[16..32]);
        let first = u64_at(e, 32).unwrap_or(0);
        let last = u64_at(e, 40).unwrap_or(0);
        let attributes = u64_at(e, 48).unwrap_or(0);
        let units = utf16_units(&e[56..128]);
        let end = units.iter().position(|&u| u == 0).unwrap_or(units.len());
        let name = decode_utf16(&units[..end]).0;
        let count = if last >= first { last - first + 1 } else { 0 };
        let description = if name.is_empty() {
            gpt_type_name(&type_guid).to_string()
        } else {
            name.clone()
        };
        let mut p = make_partition(
            src,
            vs,
            0,
            i,
            first,
            count,
            PartitionType::Gpt {
                type_guid,
                unique_guid,
                attributes,
                name,
            },
            description,
            false,
        )?;
        if last < first {
            p.errors.push(ProcessingError::at(
                ErrorKind::PartitionInvalid,
                at + (i * esize) as u64,
                format!("GPT entry {i} ends (LBA {last}) before it starts (LBA {first})"),
            ));
        } else if first < first_usable || last > last_usable {
            p.errors.push(ProcessingError::at(
                ErrorKind::PartitionInvalid,
                at + (i * esize) as u64,
                format!(
                    "GPT entry {i} (LBA {first}..={last}) is outside the usable range {first_usable}..={last_usable}"
                ),
            ));
        }
        vs.partitions.push(p);
    }
    check_overlaps(vs);
    Ok(true)
}

fn check_gpt_header(h: &[u8], lba: u64) -> Result<(), String> {
    if &h[..8] != b"EFI PART" {
        return Err("no EFI PART signature".into());
    }
    let size = usize::try_from(u32_at(h, 12).unwrap_or(0)).unwrap_or(0);
    if size < 92 || size > h.len() {
        return Err(format!("header size {size}"));
    }
    let stored = u32_at(h, 16).unwrap_or(0);
    let mut copy = h[..size].to_vec();
    copy[16..20].fill(0);
    let crc = crc32fast::hash(&copy);
    if crc != stored {
        return Err(format!("header CRC32 {stored:#010x}, computed {crc:#010x}"));
    }
    let my_lba = u64_at(h, 24).unwrap_or(0);
    if my_lba != lba {
        return Err(format!(
            "header says it is at LBA {my_lba}, read from LBA {lba}"
        ));
    }
    Ok(())
}
