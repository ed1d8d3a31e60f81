//! EWF v2 (Ex01, EnCase 7 and later): a 32-byte file header, then sections
//! whose 64-byte descriptors come after their data and point back to the
//! previous one, so a segment is read from its end. Device information
//! (sectors, bytes per sector) and case data (sectors per chunk, the case
//! metadata) are compressed UTF-16 serialized objects; sector tables hold
//! 16-byte entries (offset or fill pattern, size, flags). Layout as
//! documented by libewf's "Expert Witness Compression Format 2 (EWF2)".
//! Encrypted sections and bzip2-compressed sets are refused by name.

use super::Layout;
use super::format::{
    MAX_METADATA_BYTES, SegmentRead, decode_text, inflate_bounded, le32, le64, nonzero,
    object_values, read_exact,
};
use super::table::{EntryFormat, MAX_TABLE_ENTRIES, TableCopy, TableRef};

const FILE_HEADER: u64 = 32;
const DESCRIPTOR: u64 = 64;
const MAX_SECTIONS: usize = 1 << 20;

const DEVICE_INFO: u32 = 0x01;
const CASE_DATA: u32 = 0x02;
const SECTOR_TABLE: u32 = 0x04;
const MD5_HASH: u32 = 0x08;
const SHA1_HASH: u32 = 0x09;
const NEXT: u32 = 0x0d;
const DONE: u32 = 0x0f;
const ENCRYPTED: u32 = 0x02;

/// Case data tags and the names caseload reports.
const TAGS: [(&str, &str); 9] = [
    ("cn", "case_number"),
    ("en", "evidence_number"),
    ("nm", "description"),
    ("ex", "examiner"),
    ("nt", "notes"),
    ("av", "acquiry_software"),
    ("os", "os_version"),
    ("tt", "acquiry_date"),
    ("at", "system_date"),
];

struct Section {
    kind: u32,
    /// Where its data starts.
    data_at: u64,
    data_len: u64,
}

/// Why a segment's sections could not be listed.
enum Unlisted {
    /// Encrypted: the whole set is refused.
    Encrypted(String),
    /// Damaged: the segment's sections are lost (the set is refused when
    /// it is the first segment, which holds the geometry).
    Damaged(String),
}

/// A segment's sections from its last descriptor back to its first, in
/// file order.
fn sections(seg: &dyn SegmentRead, number: usize) -> Result<Vec<Section>, Unlisted> {
    use Unlisted::Damaged;
    if seg.len() < FILE_HEADER + DESCRIPTOR {
        return Err(Damaged(format!(
            "segment {number}: {} bytes, too short for a section",
            seg.len()
        )));
    }
    let mut out = Vec::new();
    let mut at = seg.len() - DESCRIPTOR;
    for _ in 0..MAX_SECTIONS {
        let d = read_exact(seg, number, at, DESCRIPTOR, "section descriptor").map_err(Damaged)?;
        let stored = le32(&d, 60);
        let computed = caseload_digests::adler32(&d[..60]);
        if stored != computed {
            return Err(Damaged(format!(
                "segment {number}: section descriptor at byte {at} fails its Adler-32 (stored {stored:08x}, computed {computed:08x})"
            )));
        }
        let kind = le32(&d, 0);
        if le32(&d, 4) & ENCRYPTED != 0 {
            return Err(Unlisted::Encrypted(format!(
                "segment {number}: section {kind:#x} at byte {at} is encrypted; encrypted Ex01 sets are not read (the key format is not public)"
            )));
        }
        let previous = le64(&d, 8);
        let data_len = le64(&d, 16);
        let data_at = at.checked_sub(data_len).filter(|&s| s >= FILE_HEADER).ok_or_else(|| {
            Damaged(format!("segment {number}: section {kind:#x} at byte {at} claims {data_len} bytes of data before it, more than the file holds"))
        })?;
        out.push(Section {
            kind,
            data_at,
            data_len,
        });
        if previous == 0 {
            out.reverse();
            return Ok(out);
        }
        if previous >= at || previous < FILE_HEADER {
            return Err(Damaged(format!(
                "segment {number}: section at byte {at} points back to byte {previous}, not before it"
            )));
        }
        at = previous;
    }
    Err(Damaged(format!(
        "segment {number}: more than {MAX_SECTIONS} sections"
    )))
}

fn metadata(
    seg: &dyn SegmentRead,
    number: usize,
    s: &Section,
    what: &str,
) -> Result<Vec<(String, String)>, String> {
    let raw = read_exact(
        seg,
        number,
        s.data_at,
        s.data_len.min(MAX_METADATA_BYTES),
        what,
    )?;
    let text = inflate_bounded(&raw).ok_or_else(|| {
        format!(
            "segment {number}: the {what} at byte {} does not inflate",
            s.data_at
        )
    })?;
    Ok(object_values(&decode_text(&text)))
}

/// Open a v2 set.
pub(super) fn open<S: SegmentRead>(segments: &[S]) -> Result<Layout, String> {
    let mut layout = Layout::default();
    let mut device: Option<Vec<(String, String)>> = None;
    let mut case: Option<Vec<(String, String)>> = None;
    let mut expected_first = 0u64;
    for (index, seg) in segments.iter().enumerate() {
        let number = index + 1;
        let mut header = [0u8; 12];
        let n = seg
            .read_at(&mut header, 0)
            .map_err(|e| format!("segment {number}: reading its file header: {e}"))?;
        if n == 12 && u16::from_le_bytes([header[10], header[11]]) == 2 {
            return Err(format!(
                "segment {number}: chunks are bzip2-compressed, which this version does not read"
            ));
        }
        let list = match sections(seg, number) {
            Ok(list) => list,
            Err(Unlisted::Encrypted(e)) => return Err(e),
            Err(Unlisted::Damaged(e)) if index == 0 => return Err(e),
            Err(Unlisted::Damaged(e)) => {
                layout
                    .notes
                    .push(format!("{e}; the segment's sections are not read"));
                layout.bounds.push(vec![seg.len()]);
                continue;
            }
        };
        let mut ended = false;
        for s in &list {
            match s.kind {
                DEVICE_INFO if device.is_none() => {
                    device = Some(metadata(seg, number, s, "device information")?)
                }
                CASE_DATA if case.is_none() => case = Some(metadata(seg, number, s, "case data")?),
                SECTOR_TABLE => {
                    if s.data_len < 32 {
                        return Err(format!(
                            "segment {number}: the sector table at byte {} holds {} bytes, too few for its header",
                            s.data_at, s.data_len
                        ));
                    }
                    let h = read_exact(seg, number, s.data_at, 20, "sector table header")?;
                    let first = le64(&h, 0);
                    let mut count = le32(&h, 8);
                    if le32(&h, 16) != caseload_digests::adler32(&h[..16]) {
                        return Err(format!(
                            "segment {number}: the sector table header at byte {} fails its Adler-32",
                            s.data_at
                        ));
                    }
                    if first != expected_first {
                        return Err(format!(
                            "segment {number}: the sector table at byte {} starts at chunk {first}, expected {expected_first}",
                            s.data_at
                        ));
                    }
                    let room = (s.data_len - 32) / 16;
                    let fits = u64::from(count).min(room).min(u64::from(MAX_TABLE_ENTRIES));
                    if fits < u64::from(count) {
                        layout.notes.push(format!(
                            "segment {number}: the sector table at byte {} declares {count} entries but holds {room}; {fits} are read",
                            s.data_at
                        ));
                        count = fits as u32;
                    }
                    layout.tables.push(TableRef {
                        segment: index,
                        first,
                        count,
                        copies: vec![TableCopy {
                            entries_at: s.data_at + 32,
                            base: 0,
                            checksummed: s.data_len >= 32 + u64::from(count) * 16 + 4,
                        }],
                        format: EntryFormat::V2,
                    });
                    expected_first = first + u64::from(count);
                }
                MD5_HASH if s.data_len >= 16 => {
                    let b = read_exact(seg, number, s.data_at, 16, "MD5 hash section")?;
                    layout.md5 = nonzero(&b);
                }
                SHA1_HASH if s.data_len >= 20 => {
                    let b = read_exact(seg, number, s.data_at, 20, "SHA-1 hash section")?;
                    layout.sha1 = nonzero(&b);
                }
                NEXT | DONE => ended = true,
                _ => {}
            }
        }
        if !ended {
            layout.notes.push(format!(
                "segment {number}: its sections end without a `next` or `done` section"
            ));
        }
        layout.bounds.push(vec![seg.len()]);
    }
    let device = device.ok_or("no device information section: not an Ex01 media image")?;
    let case = case.unwrap_or_default();
    let number = |list: &[(String, String)], tag: &str| -> Option<u64> {
        list.iter()
            .find(|(t, _)| t == tag)
            .and_then(|(_, v)| v.trim().parse().ok())
    };
    let bytes_per_sector = number(&device, "bp").unwrap_or(512);
    let sectors =
        number(&device, "ts").ok_or("the device information gives no sector count (`ts`)")?;
    let sectors_per_chunk = number(&case, "sb").unwrap_or(64);
    if !(512..=4096).contains(&bytes_per_sector) || !bytes_per_sector.is_power_of_two() {
        return Err(format!(
            "the device information gives {bytes_per_sector} bytes per sector"
        ));
    }
    layout.chunk_size = sectors_per_chunk
        .checked_mul(bytes_per_sector)
        .filter(|&c| c > 0 && c <= 64 << 20)
        .ok_or_else(|| {
            format!("the case data gives an implausible chunk of {sectors_per_chunk} sectors")
        })?;
    layout.media_size = sectors.checked_mul(bytes_per_sector).ok_or_else(|| {
        format!("the device information gives {sectors} sectors, more than 64 bits of bytes")
    })?;
    layout.declared_chunks = number(&case, "tb");
    layout.metadata = TAGS
        .iter()
        .filter_map(|(tag, name)| {
            case.iter()
                .find(|(t, _)| t == tag)
                .map(|(_, v)| (name.to_string(), v.clone()))
        })
        .collect();
    Ok(layout)
}
