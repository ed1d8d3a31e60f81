//! Partition tables (MBR, GPT) and FAT boot sectors, FSInfo and FAT
//! packing.

use crate::fat::FatType;
use crate::geometry::{DISK_SECTOR, Geometry, TableKind};
use crate::rng::Rng;

/// Volume serial number and GUIDs come from the seed.
fn ids(seed: u64) -> Rng {
    Rng::derive(seed, &[0x0049_4453])
}

/// A GUID from the seed's id stream (version-4 shape).
fn guid(r: &mut Rng) -> [u8; 16] {
    let mut g = [0u8; 16];
    r.fill(&mut g);
    g[7] = (g[7] & 0x0F) | 0x40;
    g[8] = (g[8] & 0x3F) | 0x80;
    g
}

/// Format a GUID as stored (mixed endian) in canonical text form.
pub fn guid_text(g: &[u8; 16]) -> String {
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

/// Microsoft basic data partition type, as stored.
const BASIC_DATA: [u8; 16] = [
    0xA2, 0xA0, 0xD0, 0xEB, 0xE5, 0xB9, 0x33, 0x44, 0x87, 0xC0, 0x68, 0xB6, 0xB7, 0x26, 0x99, 0xC7,
];

/// Linux file system data partition type, as stored.
const LINUX_DATA: [u8; 16] = [
    0xAF, 0x3D, 0xC6, 0x0F, 0x83, 0x84, 0x72, 0x47, 0x8E, 0x79, 0x3D, 0x69, 0xD8, 0x47, 0x7D, 0xE4,
];

/// Identifiers the partition table and volume carry.
#[derive(Debug, Clone)]
pub struct Ids {
    /// MBR disk signature.
    pub disk_signature: u32,
    /// Volume serial number.
    pub volume_id: u32,
    /// GPT disk GUID (stored form).
    pub disk_guid: [u8; 16],
    /// GPT partition GUID (stored form).
    pub part_guid: [u8; 16],
}

impl Ids {
    /// The identifiers of a corpus.
    pub fn new(seed: u64) -> Ids {
        let mut r = ids(seed);
        Ids {
            disk_signature: r.next_u64() as u32,
            volume_id: r.next_u64() as u32,
            disk_guid: guid(&mut r),
            part_guid: guid(&mut r),
        }
    }
}

fn mbr_entry(out: &mut [u8], kind: u8, start: u64, len: u64) {
    out[0] = 0x00;
    // CHS fields say "use LBA" (maximum values), as modern tools write.
    out[1..4].copy_from_slice(&[0xFE, 0xFF, 0xFF]);
    out[4] = kind;
    out[5..8].copy_from_slice(&[0xFE, 0xFF, 0xFF]);
    out[8..12].copy_from_slice(&(start.min(u32::MAX as u64) as u32).to_le_bytes());
    out[12..16].copy_from_slice(&(len.min(u32::MAX as u64) as u32).to_le_bytes());
}

/// The first 1 MiB of the disk: MBR (or protective MBR plus primary GPT)
/// and zeros up to the partition.
pub fn disk_head(geo: &Geometry, ids: &Ids) -> Vec<u8> {
    let mut out = vec![0u8; geo.part_offset() as usize];
    out[440..444].copy_from_slice(&ids.disk_signature.to_le_bytes());
    match geo.table {
        TableKind::Mbr => mbr_entry(
            &mut out[446..462],
            geo.mbr_type(),
            geo.part_start_lba,
            geo.part_sectors,
        ),
        TableKind::Gpt => {
            let lbas = geo.disk_bytes / DISK_SECTOR;
            mbr_entry(&mut out[446..462], 0xEE, 1, lbas - 1);
            let (header, entries) = gpt(geo, ids, true);
            out[512..1024].copy_from_slice(&header);
            out[1024..1024 + entries.len()].copy_from_slice(&entries);
        }
    }
    out[510] = 0x55;
    out[511] = 0xAA;
    out
}

/// Bytes after the partition up to the end of the disk (zeros, and the
/// backup GPT for GPT disks).
pub fn disk_tail(geo: &Geometry, ids: &Ids) -> Vec<u8> {
    let end = geo.part_offset() + geo.part_bytes();
    let mut out = vec![0u8; (geo.disk_bytes - end) as usize];
    if geo.table == TableKind::Gpt {
        let (header, entries) = gpt(geo, ids, false);
        let n = out.len();
        out[n - 512..].copy_from_slice(&header);
        let e = n - 512 - entries.len();
        out[e..n - 512].copy_from_slice(&entries);
    }
    out
}

/// (header sector, entry array) of the primary or backup GPT.
fn gpt(geo: &Geometry, ids: &Ids, primary: bool) -> (Vec<u8>, Vec<u8>) {
    let lbas = geo.disk_bytes / DISK_SECTOR;
    let mut entries = vec![0u8; 128 * 128];
    // A Mac's container partition has Apple's APFS type (and no name).
    let apfs = geo.apfs.is_some();
    entries[0..16].copy_from_slice(if apfs {
        &crate::apfs::GPT_TYPE
    } else if geo.ext4.is_some() {
        &LINUX_DATA
    } else {
        &BASIC_DATA
    });
    entries[16..32].copy_from_slice(&ids.part_guid);
    entries[32..40].copy_from_slice(&geo.part_start_lba.to_le_bytes());
    entries[40..48].copy_from_slice(&(geo.part_start_lba + geo.part_sectors - 1).to_le_bytes());
    let name = if apfs { "" } else { "Basic data partition" };
    for (i, u) in name.encode_utf16().enumerate() {
        entries[56 + 2 * i..58 + 2 * i].copy_from_slice(&u.to_le_bytes());
    }
    let entries_crc = crc32fast::hash(&entries);
    let mut h = vec![0u8; 512];
    h[0..8].copy_from_slice(b"EFI PART");
    h[8..12].copy_from_slice(&0x0001_0000u32.to_le_bytes());
    h[12..16].copy_from_slice(&92u32.to_le_bytes());
    let (me, other, table) = if primary {
        (1, lbas - 1, 2)
    } else {
        (lbas - 1, 1, lbas - 33)
    };
    h[24..32].copy_from_slice(&me.to_le_bytes());
    h[32..40].copy_from_slice(&other.to_le_bytes());
    h[40..48].copy_from_slice(&34u64.to_le_bytes());
    h[48..56].copy_from_slice(&(lbas - 34).to_le_bytes());
    h[56..72].copy_from_slice(&ids.disk_guid);
    h[72..80].copy_from_slice(&table.to_le_bytes());
    h[80..84].copy_from_slice(&128u32.to_le_bytes());
    h[84..88].copy_from_slice(&128u32.to_le_bytes());
    h[88..92].copy_from_slice(&entries_crc.to_le_bytes());
    let crc = crc32fast::hash(&h[..92]);
    h[16..20].copy_from_slice(&crc.to_le_bytes());
    (h, entries)
}

/// The reserved region of the volume: boot sector, and on FAT32 the FSInfo
/// sector and the backup copies at sector 6.
pub fn reserved_region(geo: &Geometry, ids: &Ids, free: u32, next_free: u32) -> Vec<u8> {
    let bps = geo.bps as usize;
    let mut out = vec![0u8; geo.reserved as usize * bps];
    let bs = boot_sector(geo, ids);
    out[..bps].copy_from_slice(&bs);
    if geo.fat == FatType::Fat32 {
        let fsinfo = fsinfo(bps, free, next_free);
        out[bps..2 * bps].copy_from_slice(&fsinfo);
        // Third boot sector (signature only), as Windows' format writes.
        out[3 * bps - 2] = 0x55;
        out[3 * bps - 1] = 0xAA;
        out[6 * bps..7 * bps].copy_from_slice(&bs);
        out[7 * bps..8 * bps].copy_from_slice(&fsinfo);
        out[9 * bps - 2] = 0x55;
        out[9 * bps - 1] = 0xAA;
    }
    out
}

fn boot_sector(geo: &Geometry, ids: &Ids) -> Vec<u8> {
    let mut b = vec![0u8; geo.bps as usize];
    let fat32 = geo.fat == FatType::Fat32;
    b[0..3].copy_from_slice(if fat32 {
        &[0xEB, 0x58, 0x90]
    } else {
        &[0xEB, 0x3C, 0x90]
    });
    b[3..11].copy_from_slice(b"MSDOS5.0");
    b[11..13].copy_from_slice(&(geo.bps as u16).to_le_bytes());
    b[13] = geo.spc as u8;
    b[14..16].copy_from_slice(&(geo.reserved as u16).to_le_bytes());
    b[16] = 2;
    b[17..19].copy_from_slice(&(geo.root_entries as u16).to_le_bytes());
    if !fat32 && geo.total_sectors < 65_536 {
        b[19..21].copy_from_slice(&(geo.total_sectors as u16).to_le_bytes());
    } else {
        b[32..36].copy_from_slice(&(geo.total_sectors as u32).to_le_bytes());
    }
    b[21] = 0xF8;
    if !fat32 {
        b[22..24].copy_from_slice(&(geo.fat_sectors as u16).to_le_bytes());
    }
    b[24..26].copy_from_slice(&63u16.to_le_bytes());
    b[26..28].copy_from_slice(&255u16.to_le_bytes());
    let hidden = geo.part_offset() / geo.bps as u64;
    b[28..32].copy_from_slice(&(hidden as u32).to_le_bytes());
    let ext = if fat32 {
        b[36..40].copy_from_slice(&geo.fat_sectors.to_le_bytes());
        b[44..48].copy_from_slice(&2u32.to_le_bytes());
        b[48..50].copy_from_slice(&1u16.to_le_bytes());
        b[50..52].copy_from_slice(&6u16.to_le_bytes());
        64
    } else {
        36
    };
    b[ext] = 0x80;
    b[ext + 2] = 0x29;
    b[ext + 3..ext + 7].copy_from_slice(&ids.volume_id.to_le_bytes());
    b[ext + 7..ext + 18].copy_from_slice(b"NO NAME    ");
    b[ext + 18..ext + 26].copy_from_slice(match geo.fat {
        FatType::Fat12 => b"FAT12   ",
        FatType::Fat16 => b"FAT16   ",
        FatType::Fat32 => b"FAT32   ",
    });
    // Boot code: print a message and halt, as a non-system disk does.
    let code_at = ext + 26;
    let msg = b"This is not a bootable disk.\r\n";
    b[code_at..code_at + 2].copy_from_slice(&[0xF4, 0xEB]);
    b[code_at + 2] = 0xFD;
    b[code_at + 8..code_at + 8 + msg.len()].copy_from_slice(msg);
    b[510] = 0x55;
    b[511] = 0xAA;
    b
}

fn fsinfo(bps: usize, free: u32, next_free: u32) -> Vec<u8> {
    let mut f = vec![0u8; bps];
    f[0..4].copy_from_slice(&0x4161_5252u32.to_le_bytes());
    f[484..488].copy_from_slice(&0x6141_7272u32.to_le_bytes());
    f[488..492].copy_from_slice(&free.to_le_bytes());
    f[492..496].copy_from_slice(&next_free.to_le_bytes());
    f[508..512].copy_from_slice(&0xAA55_0000u32.to_le_bytes());
    f
}

/// Packs FAT entries of 12, 16 or 32 bits into bytes as they stream by.
#[derive(Debug)]
pub struct FatPacker {
    fat: FatType,
    half: Option<u16>,
    /// Packed bytes not yet taken.
    pub buf: Vec<u8>,
}

impl FatPacker {
    /// A packer for one FAT.
    pub fn new(fat: FatType) -> Self {
        FatPacker {
            fat,
            half: None,
            buf: Vec::with_capacity(1 << 20),
        }
    }

    /// Append the next entry.
    #[inline]
    pub fn push(&mut self, v: u32) {
        match self.fat {
            FatType::Fat32 => self.buf.extend_from_slice(&(v & 0x0FFF_FFFF).to_le_bytes()),
            FatType::Fat16 => self.buf.extend_from_slice(&(v as u16).to_le_bytes()),
            FatType::Fat12 => {
                let v = (v & 0xFFF) as u16;
                match self.half.take() {
                    None => self.half = Some(v),
                    Some(a) => {
                        self.buf.push(a as u8);
                        self.buf
                            .push(((a >> 8) as u8 & 0x0F) | ((v as u8 & 0x0F) << 4));
                        self.buf.push((v >> 4) as u8);
                    }
                }
            }
        }
    }

    /// Flush a dangling FAT12 half entry (end of table).
    pub fn finish(&mut self) {
        if let Some(a) = self.half.take() {
            self.buf.push(a as u8);
            self.buf.push((a >> 8) as u8 & 0x0F);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fat12_packs_pairs() {
        let mut p = FatPacker::new(FatType::Fat12);
        p.push(0xFF8);
        p.push(0xFFF);
        p.push(0x003);
        p.finish();
        assert_eq!(p.buf, vec![0xF8, 0xFF, 0xFF, 0x03, 0x00]);
    }

    #[test]
    fn gpt_headers_carry_valid_crcs() {
        let geo = Geometry::plan(64 << 20, Some(TableKind::Gpt), None).unwrap();
        let ids = Ids::new(1);
        let head = disk_head(&geo, &ids);
        let h = &head[512..1024];
        let mut z = h[..92].to_vec();
        z[16..20].fill(0);
        assert_eq!(crc32fast::hash(&z).to_le_bytes(), h[16..20]);
        let tail = disk_tail(&geo, &ids);
        assert_eq!(&tail[tail.len() - 512..tail.len() - 504], b"EFI PART");
    }
}
