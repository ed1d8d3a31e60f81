//! VHD (Virtual PC / Hyper-V generation 1): fixed disks (data then a
//! `conectix` footer) and dynamic disks (footer copy, `cxsparse` header,
//! block allocation table, blocks of a sector bitmap then data).

use crate::error::{ContainerError, format, unsupported};
use crate::io::{Files, be32, be64};
use crate::map::{Layout, Mapping, Opened, Piece};

const SECTOR: u64 = 512;
const UNALLOCATED: u32 = u32::MAX;
/// Largest block read (256 MiB; Virtual PC and qemu write 2 MiB): its
/// sector bitmap is read whole.
const MAX_BLOCK: u64 = 1 << 28;

/// One's complement of the byte sum, skipping the checksum field at
/// `skip..skip + 4`.
fn checksum(b: &[u8], skip: usize) -> u32 {
    let sum = b
        .iter()
        .enumerate()
        .filter(|(i, _)| !(skip..skip + 4).contains(i))
        .fold(0u32, |s, (_, &x)| s.wrapping_add(u32::from(x)));
    !sum
}

/// Whether `b` starts with a VHD footer whose checksum holds.
pub(crate) fn is_footer(b: &[u8]) -> bool {
    let Some(f) = b.get(..512) else {
        return false;
    };
    f.starts_with(b"conectix") && (2..=4).contains(&be32(f, 60)) && checksum(f, 64) == be32(f, 64)
}

struct Fixed {
    file: usize,
    data_end: u64,
}

impl Layout for Fixed {
    fn map(&self, files: &Files, offset: u64) -> Result<Mapping, ContainerError> {
        let start = offset - offset % SECTOR;
        let unit = (start, start.saturating_add(SECTOR));
        if offset >= self.data_end {
            return Err(ContainerError::Corrupt {
                start: unit.0,
                end: unit.1,
                path: files.path(self.file).to_path_buf(),
                offset,
                what: format!(
                    "fixed VHD holds only {} bytes of data before its footer",
                    self.data_end
                ),
            });
        }
        Ok(Mapping {
            len: self.data_end - offset,
            piece: Piece::Data {
                file: self.file,
                offset,
            },
            unit,
        })
    }
}

struct Dynamic {
    file: usize,
    bat: u64,
    entries: u64,
    block: u64,
    bitmap: u64,
}

impl Layout for Dynamic {
    fn map(&self, files: &Files, offset: u64) -> Result<Mapping, ContainerError> {
        let index = offset / self.block;
        let within = offset % self.block;
        let start = offset - within;
        let unit = (start, start.saturating_add(self.block));
        let zero = Mapping {
            len: self.block - within,
            piece: Piece::Zero,
            unit,
        };
        if index >= self.entries {
            return Ok(zero);
        }
        let entry = files
            .u32_be(
                self.file,
                self.bat + index * 4,
                "block allocation table entry",
            )
            .map_err(|e| e.at_media(unit.0, unit.1))?;
        if entry == UNALLOCATED {
            return Ok(zero);
        }
        let at = u64::from(entry) * SECTOR;
        let sector = within / SECTOR;
        let sectors = self.block / SECTOR;
        // The sector bitmap from this sector's byte on: a set bit (most
        // significant first) means the sector's data is in the block.
        let first_byte = sector / 8;
        let mut bits = vec![0u8; usize::try_from(sectors.div_ceil(8) - first_byte).unwrap_or(0)];
        files
            .table(self.file, at + first_byte, &mut bits, "sector bitmap")
            .map_err(|e| e.at_media(unit.0, unit.1))?;
        let bit = |s: u64| {
            let i = usize::try_from(s / 8 - first_byte).unwrap_or(usize::MAX);
            bits.get(i).is_some_and(|b| b & (0x80 >> (s % 8)) != 0)
        };
        let present = bit(sector);
        let mut end = sector + 1;
        while end < sectors && bit(end) == present {
            end += 1;
        }
        let len = end * SECTOR - within;
        if !present {
            return Ok(Mapping {
                len,
                piece: Piece::Zero,
                unit,
            });
        }
        Ok(Mapping {
            len,
            piece: Piece::Data {
                file: self.file,
                offset: at + self.bitmap + within,
            },
            unit,
        })
    }
}

pub(crate) fn open(
    files: &Files,
    main: usize,
    notes: &mut Vec<String>,
) -> Result<Opened, ContainerError> {
    let path = files.path(main).to_path_buf();
    let len = files.len(main);
    let mut footer = [0u8; 512];
    let tail_at = len.saturating_sub(SECTOR);
    let tail_ok =
        len >= SECTOR && files.read_some(main, tail_at, &mut footer)? == 512 && is_footer(&footer);
    if !tail_ok {
        let mut head = [0u8; 512];
        if files.read_some(main, 0, &mut head)? == 512 && is_footer(&head) && be32(&head, 60) != 2 {
            notes.push(format!(
                "VHD footer at byte {tail_at} missing or damaged; the copy at the start of the file is used"
            ));
            footer = head;
        } else {
            return Err(format(
                &path,
                tail_at,
                "no valid VHD footer (`conectix`, checksum)",
            ));
        }
    }
    let size = be64(&footer, 48);
    match be32(&footer, 60) {
        2 => {
            let data_end = if tail_ok { tail_at } else { len };
            if size > data_end {
                notes.push(format!(
                    "fixed VHD of {size} bytes holds only {data_end} bytes of data: media bytes past it are unreadable"
                ));
            }
            Ok(Opened {
                variant: "fixed".into(),
                size,
                unit: SECTOR,
                layout: Box::new(Fixed {
                    file: main,
                    data_end,
                }),
            })
        }
        3 => open_dynamic(files, main, &footer, size, notes),
        _ => Err(unsupported(
            &path,
            "differencing disk: parent not supported (VHD disk type 4)",
        )),
    }
}

fn open_dynamic(
    files: &Files,
    main: usize,
    footer: &[u8],
    size: u64,
    notes: &mut Vec<String>,
) -> Result<Opened, ContainerError> {
    let path = files.path(main).to_path_buf();
    let at = be64(footer, 16);
    let mut h = [0u8; 1024];
    files.read_exact(main, at, &mut h, "VHD dynamic disk header")?;
    if !h.starts_with(b"cxsparse") {
        return Err(format(
            &path,
            at,
            "VHD dynamic disk header has no `cxsparse` cookie",
        ));
    }
    if checksum(&h, 36) != be32(&h, 36) {
        notes.push(format!(
            "VHD dynamic disk header at byte {at}: checksum does not match (read anyway)"
        ));
    }
    let bat = be64(&h, 16);
    let entries = u64::from(be32(&h, 28));
    let block = u64::from(be32(&h, 32));
    if !block.is_power_of_two() || !(SECTOR..=MAX_BLOCK).contains(&block) {
        return Err(format(
            &path,
            at + 32,
            format!("VHD block size {block} is not a power of two from 512 to 256 MiB"),
        ));
    }
    if bat >= files.len(main) {
        return Err(format(
            &path,
            at + 16,
            format!("block allocation table offset {bat} lies past the end of the file"),
        ));
    }
    if entries.saturating_mul(block) < size {
        notes.push(format!(
            "VHD block allocation table has {entries} entries of {block} bytes for a {size}-byte disk: the rest reads as zeros"
        ));
    }
    let bitmap = (block / SECTOR).div_ceil(8).next_multiple_of(SECTOR);
    Ok(Opened {
        variant: "dynamic".into(),
        size,
        unit: block,
        layout: Box::new(Dynamic {
            file: main,
            bat,
            entries,
            block,
            bitmap,
        }),
    })
}
