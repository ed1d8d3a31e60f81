//! VHDX (MS-VHDX 1.0): two headers (the valid one with the higher sequence
//! number is current), two region tables, the metadata region (block size,
//! disk size, sector size, parent flag) and the BAT of payload blocks.
//! Read-only: a log that still holds entries is noted, never replayed.

use crate::error::{ContainerError, format, unsupported};
use crate::io::{Files, crc32c, le16, le32, le64};
use crate::map::{Layout, Mapping, Opened, Piece};

const KIB64: u64 = 64 << 10;
const MIB: u64 = 1 << 20;
/// Most region table and metadata table entries the format allows.
const MAX_ENTRIES: u32 = 2047;

/// GUIDs as stored: the first three fields little-endian.
const fn guid(a: u32, b: u16, c: u16, d: [u8; 8]) -> [u8; 16] {
    let a = a.to_le_bytes();
    let b = b.to_le_bytes();
    let c = c.to_le_bytes();
    [
        a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], d[0], d[1], d[2], d[3], d[4], d[5], d[6],
        d[7],
    ]
}

const BAT: [u8; 16] = guid(
    0x2DC2_7766,
    0xF623,
    0x4200,
    [0x9D, 0x64, 0x11, 0x5E, 0x9B, 0xFD, 0x4A, 0x08],
);
const METADATA: [u8; 16] = guid(
    0x8B7C_A206,
    0x4790,
    0x4B9A,
    [0xB8, 0xFE, 0x57, 0x5F, 0x05, 0x0F, 0x88, 0x6E],
);
const FILE_PARAMETERS: [u8; 16] = guid(
    0xCAA1_6737,
    0xFA36,
    0x4D43,
    [0xB3, 0xB6, 0x33, 0xF0, 0xAA, 0x44, 0xE7, 0x6B],
);
const VIRTUAL_DISK_SIZE: [u8; 16] = guid(
    0x2FA5_4224,
    0xCD1B,
    0x4876,
    [0xB2, 0x11, 0x5D, 0xBE, 0xD8, 0x3B, 0xF4, 0xB8],
);
const LOGICAL_SECTOR_SIZE: [u8; 16] = guid(
    0x8141_BF1D,
    0xA96F,
    0x4709,
    [0xBA, 0x47, 0xF2, 0x33, 0xA8, 0xFA, 0xAB, 0x5F],
);
const PHYSICAL_SECTOR_SIZE: [u8; 16] = guid(
    0xCDA3_48C7,
    0x445D,
    0x4471,
    [0x9C, 0xC9, 0xE9, 0x88, 0x52, 0x51, 0xC5, 0x56],
);
const VIRTUAL_DISK_ID: [u8; 16] = guid(
    0xBECA_12AB,
    0xB2E6,
    0x4523,
    [0x93, 0xEF, 0xC3, 0x09, 0xE0, 0x00, 0xC7, 0x46],
);
const PARENT_LOCATOR: [u8; 16] = guid(
    0xA8D3_5F2D,
    0xB30B,
    0x454D,
    [0xAB, 0xF7, 0xD3, 0xD8, 0x48, 0x34, 0xAB, 0x0C],
);

/// Payload block states.
const NOT_PRESENT: u64 = 0;
const UNDEFINED: u64 = 1;
const ZERO: u64 = 2;
const UNMAPPED: u64 = 3;
const FULLY_PRESENT: u64 = 6;
const PARTIALLY_PRESENT: u64 = 7;

/// Whether a checksummed structure's CRC-32C (field at offset 4) holds.
fn checksum_ok(b: &[u8]) -> bool {
    let stored = le32(b, 4);
    let mut copy = b.to_vec();
    if let Some(f) = copy.get_mut(4..8) {
        f.fill(0);
    }
    crc32c(&copy) == stored
}

struct Vhdx {
    file: usize,
    bat: u64,
    bat_entries: u64,
    block: u64,
    chunk_ratio: u64,
}

impl Layout for Vhdx {
    fn map(&self, files: &Files, offset: u64) -> Result<Mapping, ContainerError> {
        let index = offset / self.block;
        let within = offset % self.block;
        let start = offset - within;
        let unit = (start, start.saturating_add(self.block));
        let len = self.block - within;
        let path = || files.path(self.file).to_path_buf();
        // A sector bitmap entry follows every chunk_ratio payload entries.
        let slot = index + index / self.chunk_ratio;
        if slot >= self.bat_entries {
            return Err(ContainerError::Corrupt {
                start: unit.0,
                end: unit.1,
                path: path(),
                offset: self.bat,
                what: format!(
                    "block {index} has no BAT entry (the BAT holds {})",
                    self.bat_entries
                ),
            });
        }
        let entry_at = self.bat + slot * 8;
        let entry = files
            .u64_le(self.file, entry_at, "BAT entry")
            .map_err(|e| e.at_media(unit.0, unit.1))?;
        let state = entry & 7;
        let at = (entry >> 20) << 20;
        let corrupt = |what: String| ContainerError::Corrupt {
            start: unit.0,
            end: unit.1,
            path: path(),
            offset: entry_at,
            what,
        };
        match state {
            NOT_PRESENT | UNDEFINED | ZERO | UNMAPPED => Ok(Mapping {
                len,
                piece: Piece::Zero,
                unit,
            }),
            FULLY_PRESENT => {
                if at == 0 || at.saturating_add(self.block) > files.len(self.file) {
                    return Err(corrupt(format!(
                        "BAT entry puts block {index} at byte {at}, past the end of the file (size {})",
                        files.len(self.file)
                    )));
                }
                Ok(Mapping {
                    len,
                    piece: Piece::Data {
                        file: self.file,
                        offset: at + within,
                    },
                    unit,
                })
            }
            PARTIALLY_PRESENT => Err(corrupt(format!(
                "block {index} is partially present, which needs a parent this disk does not declare"
            ))),
            other => Err(corrupt(format!(
                "block {index} has invalid BAT state {other}"
            ))),
        }
    }
}

/// The current header: (index 0 or 1, its bytes).
fn current_header(
    files: &Files,
    main: usize,
    notes: &mut Vec<String>,
) -> Result<[u8; 4096], ContainerError> {
    let path = files.path(main);
    let mut best: Option<(u64, [u8; 4096])> = None;
    let mut bad = Vec::new();
    for (i, at) in [KIB64, 2 * KIB64].into_iter().enumerate() {
        let mut h = [0u8; 4096];
        let ok =
            files.read_some(main, at, &mut h)? == 4096 && h.starts_with(b"head") && checksum_ok(&h);
        if !ok {
            bad.push(format!("header {} at byte {at}", i + 1));
            continue;
        }
        let seq = le64(&h, 8);
        if best.as_ref().is_none_or(|(s, _)| seq > *s) {
            best = Some((seq, h));
        }
    }
    let Some((_, h)) = best else {
        return Err(format(
            path,
            KIB64,
            "neither VHDX header is valid (`head`, CRC-32C)",
        ));
    };
    for b in bad {
        notes.push(format!(
            "VHDX {b} is damaged (signature or CRC-32C); the other is used"
        ));
    }
    Ok(h)
}

/// A region's file offset and length.
type Region = (u64, u64);

/// The valid region table's BAT and metadata regions.
fn regions(
    files: &Files,
    main: usize,
    notes: &mut Vec<String>,
) -> Result<(Region, Region), ContainerError> {
    let path = files.path(main);
    let mut table = None;
    for (i, at) in [3 * KIB64, 4 * KIB64].into_iter().enumerate() {
        let mut t = vec![0u8; KIB64 as usize];
        if files.read_some(main, at, &mut t)? == t.len()
            && t.starts_with(b"regi")
            && checksum_ok(&t)
            && le32(&t, 8) <= MAX_ENTRIES
        {
            if i == 1 {
                notes.push("VHDX region table 1 is damaged; region table 2 is used".into());
            }
            table = Some((at, t));
            break;
        }
    }
    let Some((at, t)) = table else {
        return Err(format(
            path,
            3 * KIB64,
            "neither VHDX region table is valid (`regi`, CRC-32C)",
        ));
    };
    let mut bat = None;
    let mut meta = None;
    for i in 0..le32(&t, 8) as usize {
        let e = &t[16 + i * 32..16 + (i + 1) * 32];
        let offset = le64(e, 16);
        let length = u64::from(le32(e, 24));
        let required = le32(e, 28) & 1 != 0;
        let here = at + 16 + (i as u64) * 32;
        if e[..16] == BAT {
            bat = Some((offset, length));
        } else if e[..16] == METADATA {
            meta = Some((offset, length));
        } else if required {
            return Err(unsupported(
                path,
                format!(
                    "VHDX region {:02x?} at byte {here} is required but unknown",
                    &e[..16]
                ),
            ));
        }
        if !offset.is_multiple_of(MIB) || offset < MIB {
            return Err(format(
                path,
                here,
                format!(
                    "VHDX region at byte {offset} is not on a 1 MiB boundary after the header area"
                ),
            ));
        }
    }
    match (bat, meta) {
        (Some(b), Some(m)) => Ok((b, m)),
        _ => Err(format(
            path,
            at,
            "VHDX region table lacks the BAT or metadata region",
        )),
    }
}

pub(crate) fn open(
    files: &Files,
    main: usize,
    notes: &mut Vec<String>,
) -> Result<Opened, ContainerError> {
    let path = files.path(main).to_path_buf();
    let h = current_header(files, main, notes)?;
    let version = le16(&h, 66);
    if version != 1 {
        return Err(unsupported(&path, format!("VHDX version {version}")));
    }
    if h[48..64].iter().any(|&b| b != 0) {
        notes.push(format!(
            "VHDX log (at byte {}, {} bytes) holds entries not yet replayed: the file is read as it is, without replaying them",
            le64(&h, 72),
            le32(&h, 68)
        ));
    }
    let ((bat, bat_len), (meta, meta_len)) = regions(files, main, notes)?;
    // The metadata table: at most 2047 entries of 32 bytes after a 32-byte
    // header, so 64 KiB.
    let mut t = vec![0u8; KIB64 as usize];
    files.read_exact(main, meta, &mut t, "VHDX metadata table")?;
    if !t.starts_with(b"metadata") {
        return Err(format(
            &path,
            meta,
            "VHDX metadata table has no `metadata` signature",
        ));
    }
    let count = le16(&t, 10);
    if u32::from(count) > MAX_ENTRIES {
        return Err(format(
            &path,
            meta + 10,
            format!("VHDX metadata table claims {count} entries"),
        ));
    }
    let mut block = None;
    let mut has_parent = false;
    let mut leave_allocated = false;
    let mut size = None;
    let mut sector = None;
    for i in 0..usize::from(count) {
        let e = &t[32 + i * 32..32 + (i + 1) * 32];
        let id: [u8; 16] = e[..16].try_into().unwrap_or([0; 16]);
        let off = u64::from(le32(e, 16));
        let len = u64::from(le32(e, 20));
        let required = le32(e, 24) & 4 != 0;
        let item_at = meta + off;
        if off.saturating_add(len) > meta_len {
            return Err(format(
                &path,
                meta + 32 + i as u64 * 32,
                "VHDX metadata item lies outside its region",
            ));
        }
        let mut v = [0u8; 8];
        let n = len.min(8) as usize;
        if [FILE_PARAMETERS, VIRTUAL_DISK_SIZE, LOGICAL_SECTOR_SIZE].contains(&id) {
            files.read_exact(main, item_at, &mut v[..n], "VHDX metadata item")?;
        }
        match id {
            FILE_PARAMETERS => {
                block = Some(u64::from(le32(&v, 0)));
                leave_allocated = le32(&v, 4) & 1 != 0;
                has_parent = le32(&v, 4) & 2 != 0;
            }
            VIRTUAL_DISK_SIZE => size = Some(le64(&v, 0)),
            LOGICAL_SECTOR_SIZE => sector = Some(u64::from(le32(&v, 0))),
            PHYSICAL_SECTOR_SIZE | VIRTUAL_DISK_ID | PARENT_LOCATOR => {}
            _ if required => {
                return Err(unsupported(
                    &path,
                    format!("VHDX metadata item {:02x?} is required but unknown", &id),
                ));
            }
            _ => {}
        }
    }
    if has_parent {
        return Err(unsupported(
            &path,
            "differencing disk: parent not supported (VHDX HasParent)",
        ));
    }
    let (Some(block), Some(size), Some(sector)) = (block, size, sector) else {
        return Err(format(
            &path,
            meta,
            "VHDX metadata lacks file parameters, virtual disk size or logical sector size",
        ));
    };
    if !block.is_power_of_two() || !(MIB..=256 * MIB).contains(&block) {
        return Err(format(
            &path,
            meta,
            format!("VHDX block size {block} is not a power of two from 1 to 256 MiB"),
        ));
    }
    if sector != 512 && sector != 4096 {
        return Err(format(
            &path,
            meta,
            format!("VHDX logical sector size {sector} is neither 512 nor 4096"),
        ));
    }
    let chunk_ratio = ((1u64 << 23) * sector) / block;
    let blocks = size.div_ceil(block);
    let needed = blocks + blocks.saturating_sub(1) / chunk_ratio;
    let bat_entries = bat_len / 8;
    if bat_entries < needed {
        notes.push(format!(
            "VHDX BAT holds {bat_entries} entries, {needed} are needed for a {size}-byte disk: later blocks are unreadable"
        ));
    }
    if bat.saturating_add(bat_len) > files.len(main) {
        notes.push(format!(
            "VHDX BAT at byte {bat} runs past the end of the file"
        ));
    }
    // A fixed disk is one whose blocks stay allocated (LeaveBlocksAllocated).
    let variant = if leave_allocated { "fixed" } else { "dynamic" };
    Ok(Opened {
        variant: variant.into(),
        size,
        unit: block,
        layout: Box::new(Vhdx {
            file: main,
            bat,
            bat_entries,
            block,
            chunk_ratio,
        }),
    })
}
