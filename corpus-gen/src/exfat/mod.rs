//! exFAT on-disk structures as `mkfs.exfat` (exfatprogs 1.2) lays them out
//! by default: the 12-sector boot region and its backup, one FAT aligned to
//! 1 MiB, the cluster heap aligned to 1 MiB, the allocation bitmap at
//! cluster 2, the up-case table after it and the root directory after
//! that; entry sets (File, Stream Extension, File Name) with their
//! checksums.
//!
//! The planner's clusters are the heap's clusters after the bitmap and the
//! up-case table: planner cluster `c` is exFAT cluster `c + sys` (see
//! [`ExfatParams::sys_clusters`]), so the skeleton (root first) starts where
//! mkfs puts the root.

pub mod layout;
pub mod write;

use crate::names::{NameForm, Stamp, Times};

/// The standard compressed up-case table (5,836 bytes), as mkfs.exfat
/// writes it.
pub const UPCASE: &[u8] = include_bytes!("upcase.bin");
/// Bytes per sector (mkfs's default on a 512-byte-sector device).
pub const SECTOR: u64 = 512;
/// Bytes of one directory entry.
pub const ENTRY: usize = 32;
/// Name characters (UTF-16 units) per File Name entry.
pub const NAME_PER_ENTRY: usize = 15;
/// Longest name in UTF-16 units.
pub const MAX_NAME: usize = 255;
/// Largest directory: 256 MiB of entries.
pub const MAX_DIR_BYTES: u64 = 256 << 20;
/// Alignment of the FAT and the heap (mkfs's default boundary).
const ALIGN: u64 = 1 << 20;
/// The volume label every corpus carries.
pub const LABEL: &str = "CASELOAD";
/// Characters exFAT refuses in a name (besides control characters).
pub const FORBIDDEN: &str = "\"*/:<>?\\|";

/// Entry type bytes (in use).
pub mod kind {
    /// Allocation bitmap.
    pub const BITMAP: u8 = 0x81;
    /// Up-case table.
    pub const UPCASE: u8 = 0x82;
    /// Volume label.
    pub const LABEL: u8 = 0x83;
    /// File (primary of an entry set).
    pub const FILE: u8 = 0x85;
    /// Stream Extension.
    pub const STREAM: u8 = 0xC0;
    /// File Name.
    pub const NAME: u8 = 0xC1;
    /// The `InUse` bit, cleared on deletion.
    pub const IN_USE: u8 = 0x80;
}

/// Where exFAT puts its regions on a volume (all from the volume's start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExfatParams {
    /// Sectors in the volume.
    pub volume_sectors: u64,
    /// Sectors per cluster, as a power of two.
    pub spc_shift: u8,
    /// First FAT sector.
    pub fat_offset: u32,
    /// Sectors of the FAT.
    pub fat_length: u32,
    /// First heap sector (cluster 2).
    pub heap_offset: u32,
    /// Clusters in the heap.
    pub cluster_count: u32,
    /// Clusters of the allocation bitmap (from cluster 2).
    pub bitmap_clusters: u32,
    /// Clusters of the up-case table (after the bitmap).
    pub upcase_clusters: u32,
}

impl ExfatParams {
    /// The layout mkfs.exfat chooses for a volume of `volume_bytes` whose
    /// partition starts `part_offset` bytes into the disk; `None` when the
    /// volume has too few clusters for the bitmap, up-case table and a
    /// root.
    pub fn for_volume(volume_bytes: u64, part_offset: u64) -> Option<ExfatParams> {
        let cluster = cluster_bytes_for(volume_bytes);
        let fat_byte_off = (part_offset + 24 * SECTOR).next_multiple_of(ALIGN) - part_offset;
        let fat_byte_len = (volume_bytes / cluster * 4).next_multiple_of(cluster);
        let heap_byte_off =
            (part_offset + fat_byte_off + fat_byte_len).next_multiple_of(ALIGN) - part_offset;
        let clusters = volume_bytes.checked_sub(heap_byte_off)? / cluster;
        if clusters > 0xFFFF_FFF5 {
            return None;
        }
        let bitmap_clusters = clusters.div_ceil(8).div_ceil(cluster);
        let upcase_clusters = (UPCASE.len() as u64).div_ceil(cluster);
        if clusters < bitmap_clusters + upcase_clusters + 1 {
            return None;
        }
        Some(ExfatParams {
            volume_sectors: volume_bytes / SECTOR,
            spc_shift: (cluster / SECTOR).trailing_zeros() as u8,
            fat_offset: (fat_byte_off / SECTOR) as u32,
            fat_length: (fat_byte_len / SECTOR) as u32,
            heap_offset: (heap_byte_off / SECTOR) as u32,
            cluster_count: clusters as u32,
            bitmap_clusters: bitmap_clusters as u32,
            upcase_clusters: upcase_clusters as u32,
        })
    }

    /// Bytes per cluster.
    pub fn cluster_bytes(&self) -> u64 {
        SECTOR << self.spc_shift
    }

    /// Clusters before the planner's cluster 2 (bitmap and up-case table).
    pub fn sys_clusters(&self) -> u32 {
        self.bitmap_clusters + self.upcase_clusters
    }

    /// The exFAT cluster number of planner cluster `c`.
    pub fn cluster(&self, c: u32) -> u32 {
        c + self.sys_clusters()
    }

    /// First cluster of the up-case table.
    pub fn upcase_cluster(&self) -> u32 {
        2 + self.bitmap_clusters
    }

    /// First cluster of the root directory (the skeleton's first folder).
    pub fn root_cluster(&self) -> u32 {
        2 + self.sys_clusters()
    }

    /// Bytes of the allocation bitmap as its directory entry states them.
    pub fn bitmap_bytes(&self) -> u64 {
        (self.cluster_count as u64).div_ceil(8)
    }
}

/// mkfs.exfat's default cluster size for a volume.
pub fn cluster_bytes_for(volume_bytes: u64) -> u64 {
    if volume_bytes <= 256 << 20 {
        4096
    } else if volume_bytes <= 32 << 30 {
        32 << 10
    } else {
        128 << 10
    }
}

/// The name exFAT stores for `name`: each forbidden character (`"*/:<>?\|`
/// and control characters) replaced by `_`, as Windows Explorer renames a
/// file copied from a file system that allows them; `None` when nothing
/// changes.
pub fn storable_name(name: &str) -> Option<String> {
    if !name
        .chars()
        .any(|c| FORBIDDEN.contains(c) || (c as u32) < 0x20)
    {
        return None;
    }
    Some(
        name.chars()
            .map(|c| {
                if FORBIDDEN.contains(c) || (c as u32) < 0x20 {
                    '_'
                } else {
                    c
                }
            })
            .collect(),
    )
}

/// The name a planned [`NameForm`] stands for (its long name, or its 8.3
/// name with the NT case flags applied).
pub fn form_name(form: &NameForm) -> String {
    crate::names::stored_name(form)
}

/// Entries (32 bytes each) an entry set for `name` takes.
pub fn set_entries(name: &str) -> usize {
    2 + name
        .encode_utf16()
        .count()
        .min(MAX_NAME)
        .div_ceil(NAME_PER_ENTRY)
        .max(1)
}

/// Little-endian helpers over a fixed entry.
fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// One entry set to encode.
#[derive(Debug, Clone)]
pub struct SetRecord<'a> {
    /// The stored name.
    pub name: &'a str,
    /// A directory.
    pub dir: bool,
    /// First exFAT cluster (0 for an empty file).
    pub cluster: u32,
    /// Bytes of the stream (a directory's: its clusters).
    pub size: u64,
    /// Whether the clusters are contiguous and the FAT is not used.
    pub no_fat_chain: bool,
    /// Timestamps.
    pub times: Times,
    /// Whether the set is deleted (`InUse` cleared on every entry).
    pub deleted: bool,
}

fn stamp32(s: &Stamp) -> u32 {
    (s.dos_date() as u32) << 16 | s.dos_time() as u32
}

/// Append one entry set: File, Stream Extension and File Name entries,
/// with the name hash (through the up-case table) and the set checksum.
pub fn encode_set(out: &mut Vec<u8>, r: &SetRecord<'_>, up: &caseload_fs::exfat::upcase::Upcase) {
    let units: Vec<u16> = r.name.encode_utf16().take(MAX_NAME).collect();
    let names = units.len().div_ceil(NAME_PER_ENTRY).max(1);
    let mut set = vec![0u8; (2 + names) * ENTRY];
    // File entry.
    set[0] = kind::FILE;
    set[1] = (1 + names) as u8;
    put16(&mut set, 4, if r.dir { 0x10 } else { 0x20 });
    put32(&mut set, 8, stamp32(&r.times.created));
    put32(&mut set, 12, stamp32(&r.times.modified));
    put32(&mut set, 16, stamp32(&r.times.accessed));
    set[20] = r.times.created.dos_tenths();
    set[21] = r.times.modified.dos_tenths();
    // UTC offsets valid and zero: the times are UTC (what Linux writes).
    set[22] = 0x80;
    set[23] = 0x80;
    set[24] = 0x80;
    // Stream Extension.
    let s = &mut set[ENTRY..2 * ENTRY];
    s[0] = kind::STREAM;
    s[1] = if r.no_fat_chain { 0x03 } else { 0x01 };
    s[3] = units.len() as u8;
    let hash = caseload_fs::exfat::entry::name_hash(&up.up_name(&units));
    put16(s, 4, hash);
    put64(s, 8, r.size);
    put32(s, 20, r.cluster);
    put64(s, 24, r.size);
    // File Name entries.
    for n in 0..names {
        let e = &mut set[(2 + n) * ENTRY..(3 + n) * ENTRY];
        e[0] = kind::NAME;
        for (i, u) in units
            .iter()
            .skip(n * NAME_PER_ENTRY)
            .take(NAME_PER_ENTRY)
            .enumerate()
        {
            put16(e, 2 + 2 * i, *u);
        }
    }
    let sum = caseload_fs::exfat::entry::entry_set_checksum(&set);
    put16(&mut set, 2, sum);
    if r.deleted {
        for e in set.chunks_mut(ENTRY) {
            e[0] &= !kind::IN_USE;
        }
    }
    out.extend_from_slice(&set);
}

/// The root's own entries, first as mkfs writes them: the volume label,
/// the allocation bitmap and the up-case table.
pub fn encode_root_head(out: &mut Vec<u8>, p: &ExfatParams) {
    let mut e = [0u8; ENTRY];
    e[0] = kind::LABEL;
    let label: Vec<u16> = LABEL.encode_utf16().collect();
    e[1] = label.len() as u8;
    for (i, u) in label.iter().enumerate() {
        put16(&mut e, 2 + 2 * i, *u);
    }
    out.extend_from_slice(&e);
    let mut e = [0u8; ENTRY];
    e[0] = kind::BITMAP;
    put32(&mut e, 20, 2);
    put64(&mut e, 24, p.bitmap_bytes());
    out.extend_from_slice(&e);
    let mut e = [0u8; ENTRY];
    e[0] = kind::UPCASE;
    put32(
        &mut e,
        4,
        caseload_fs::exfat::upcase::table_checksum(UPCASE),
    );
    put32(&mut e, 20, p.upcase_cluster());
    put64(&mut e, 24, UPCASE.len() as u64);
    out.extend_from_slice(&e);
}

/// Entries the root's own head takes.
pub const ROOT_HEAD_ENTRIES: usize = 3;

/// The 12-sector boot region (main and backup are the same bytes).
pub fn boot_region(
    p: &ExfatParams,
    part_start_lba: u64,
    serial: u32,
    percent_in_use: u8,
) -> Vec<u8> {
    let s = SECTOR as usize;
    let mut r = vec![0u8; 12 * s];
    let b = &mut r[..s];
    b[0..3].copy_from_slice(&[0xEB, 0x76, 0x90]);
    b[3..11].copy_from_slice(b"EXFAT   ");
    put64(b, 64, part_start_lba);
    put64(b, 72, p.volume_sectors);
    put32(b, 80, p.fat_offset);
    put32(b, 84, p.fat_length);
    put32(b, 88, p.heap_offset);
    put32(b, 92, p.cluster_count);
    put32(b, 96, p.root_cluster());
    put32(b, 100, serial);
    put16(b, 104, 0x0100);
    b[108] = 9;
    b[109] = p.spc_shift;
    b[110] = 1;
    b[111] = 0x80;
    b[112] = percent_in_use;
    b[510] = 0x55;
    b[511] = 0xAA;
    // Extended boot sectors: the signature in their last four bytes.
    for k in 1..9 {
        r[k * s + s - 2] = 0x55;
        r[k * s + s - 1] = 0xAA;
    }
    let sum = caseload_fs::exfat::boot::boot_checksum(&r, s);
    for c in r[11 * s..].chunks_mut(4) {
        c.copy_from_slice(&sum.to_le_bytes());
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_match_mkfs_for_63_mib() {
        // mkfs.exfat 1.2.0 on a 63 MiB file: FAT at 2048 for 128 sectors,
        // heap at 4096, 15,616 clusters of 4 KiB, root at cluster 5.
        let p = ExfatParams::for_volume(63 << 20, 0).unwrap();
        assert_eq!(p.fat_offset, 2048);
        assert_eq!(p.fat_length, 128);
        assert_eq!(p.heap_offset, 4096);
        assert_eq!(p.cluster_count, 15_616);
        assert_eq!(p.root_cluster(), 5);
        assert_eq!(p.bitmap_bytes(), 1952);
        assert_eq!(cluster_bytes_for(300 << 20), 32768);
    }

    #[test]
    fn upcase_table_is_the_standard_one() {
        assert_eq!(UPCASE.len(), 5836);
        assert_eq!(
            caseload_fs::exfat::upcase::table_checksum(UPCASE),
            0xE619_D30D
        );
    }

    #[test]
    fn forbidden_characters_are_replaced() {
        assert_eq!(storable_name("a:b?.txt").as_deref(), Some("a_b_.txt"));
        assert_eq!(storable_name("plain.txt"), None);
        assert_eq!(set_entries("a"), 3);
        assert_eq!(set_entries(&"x".repeat(16)), 4);
    }
}
