//! Byte encoders for the EWF v1 structures this writer emits.
//!
//! Every function here is pure: it turns values into the exact bytes that go
//! on disk, so the layout can be unit-tested without touching files. Field
//! offsets follow the libyal "Expert Witness Compression Format" description
//! (sections "Section descriptor", "Volume section", "Table section",
//! "Digest section", "Hash section", "Header2/Header section") and were
//! cross-checked against images libewf 20140813 writes with `-f encase6`.

use crate::options::{Compression, Metadata};

/// Signature at offset 0 of every EWF v1 (`.E01`) segment file.
pub(crate) const EVF_SIGNATURE: [u8; 8] = *b"EVF\x09\x0d\x0a\xff\x00";
/// Size of the per-segment file header.
pub(crate) const FILE_HEADER_LEN: u64 = 13;
/// Size of a section descriptor.
pub(crate) const DESCRIPTOR_LEN: u64 = 76;
/// Size of the volume (and data) section body in the EnCase layout.
pub(crate) const VOLUME_BODY_LEN: usize = 1052;
/// Size of a whole volume or data section.
pub(crate) const VOLUME_SECTION_LEN: u64 = DESCRIPTOR_LEN + VOLUME_BODY_LEN as u64;
/// Size of a whole digest section (MD5, SHA-1, padding, checksum).
pub(crate) const DIGEST_SECTION_LEN: u64 = DESCRIPTOR_LEN + 80;
/// Size of a whole hash section (MD5, 16 unknown bytes, checksum).
pub(crate) const HASH_SECTION_LEN: u64 = DESCRIPTOR_LEN + 36;
/// `next` and `done` sections are a bare descriptor.
pub(crate) const END_SECTION_LEN: u64 = DESCRIPTOR_LEN;
/// Table header (24) plus footer checksum (4); entries come between.
pub(crate) const TABLE_FIXED_LEN: u64 = 24 + 4;
pub use crate::options::BYTES_PER_SECTOR;

/// Adler-32 as EWF uses it (zlib's definition, initial value 1).
pub(crate) fn adler32(data: &[u8]) -> u32 {
    caseload_digests::adler32(data)
}

/// The 13-byte file header of segment `number` (1-based).
pub(crate) fn file_header(number: u16) -> [u8; 13] {
    let mut h = [0u8; 13];
    h[..8].copy_from_slice(&EVF_SIGNATURE);
    h[8] = 0x01;
    h[9..11].copy_from_slice(&number.to_le_bytes());
    // Bytes 11..13 are the "end of fields" marker, zero.
    h
}

/// A 76-byte section descriptor.
///
/// `next` is the absolute offset of the following section in the same file
/// (its own offset for `next` and `done`); `size` covers the descriptor and
/// the section's body. The checksum covers the first 72 bytes.
pub(crate) fn descriptor(kind: &str, next: u64, size: u64) -> [u8; 76] {
    let mut d = [0u8; 76];
    let name = kind.as_bytes();
    // Section type names are ASCII constants shorter than 16 bytes.
    let n = name.len().min(16);
    d[..n].copy_from_slice(&name[..n]);
    d[16..24].copy_from_slice(&next.to_le_bytes());
    d[24..32].copy_from_slice(&size.to_le_bytes());
    let sum = adler32(&d[..72]);
    d[72..76].copy_from_slice(&sum.to_le_bytes());
    d
}

/// The values the volume and data sections carry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct VolumeInfo {
    /// Number of chunks in the whole image.
    pub chunk_count: u32,
    /// Sectors per chunk.
    pub sectors_per_chunk: u32,
    /// Sectors in the whole (padded) media.
    pub sector_count: u64,
    /// Compression level recorded for readers (0 none, 1 fast, 2 best).
    pub compression: Compression,
    /// Segment file set identifier.
    pub guid: [u8; 16],
}

/// The 1052-byte body shared by the `volume` (first segment) and `data`
/// (later segments, and the end of a single-segment image) sections.
///
/// Layout (EnCase 5-7 / libewf "encase6"): media type at 0 (0x01 fixed disk),
/// chunk count at 4, sectors per chunk at 8, bytes per sector at 12, sector
/// count (64-bit) at 16, CHS at 24..36 (zero), media flags at 36 (0x01 image
/// file | 0x02 physical, as libewf sets by default), PALM start at 40, SMART
/// logs at 48, compression level at 52, error granularity at 56 (libewf sets
/// it to the sectors per chunk), set GUID at 64..80, zero up to 1048, then the
/// Adler-32 of bytes 0..1048.
pub(crate) fn volume_body(info: &VolumeInfo) -> [u8; VOLUME_BODY_LEN] {
    let mut b = [0u8; VOLUME_BODY_LEN];
    b[0] = 0x01;
    b[4..8].copy_from_slice(&info.chunk_count.to_le_bytes());
    b[8..12].copy_from_slice(&info.sectors_per_chunk.to_le_bytes());
    b[12..16].copy_from_slice(&BYTES_PER_SECTOR.to_le_bytes());
    b[16..24].copy_from_slice(&info.sector_count.to_le_bytes());
    b[36] = 0x03;
    b[52] = info.compression.volume_level();
    b[56..60].copy_from_slice(&info.sectors_per_chunk.to_le_bytes());
    b[64..80].copy_from_slice(&info.guid);
    let sum = adler32(&b[..1048]);
    b[1048..1052].copy_from_slice(&sum.to_le_bytes());
    b
}

/// Size of a `table` (or `table2`) section holding `entries` offsets.
pub(crate) fn table_section_len(entries: u64) -> u64 {
    DESCRIPTOR_LEN + TABLE_FIXED_LEN + 4 * entries
}

/// Body of a `table`/`table2` section: entry count, the group's base offset
/// (the absolute offset of its `sectors` section, EnCase 6 style, so entries
/// are 31-bit offsets relative to it), a header checksum, the entries, and a
/// footer checksum over the entries.
pub(crate) fn table_body(base: u64, entries: &[u32]) -> Vec<u8> {
    let mut b = Vec::with_capacity(24 + 4 * entries.len() + 4);
    // The caller never builds a group larger than 65534 entries.
    let count = u32::try_from(entries.len()).unwrap_or(u32::MAX);
    b.extend_from_slice(&count.to_le_bytes());
    b.extend_from_slice(&[0u8; 4]);
    b.extend_from_slice(&base.to_le_bytes());
    b.extend_from_slice(&[0u8; 4]);
    let sum = adler32(&b[..20]);
    b.extend_from_slice(&sum.to_le_bytes());
    for e in entries {
        b.extend_from_slice(&e.to_le_bytes());
    }
    let sum = adler32(&b[24..]);
    b.extend_from_slice(&sum.to_le_bytes());
    b
}

/// Body of the `digest` section: MD5, SHA-1, 40 zero bytes, checksum.
pub(crate) fn digest_body(md5: &[u8; 16], sha1: &[u8; 20]) -> [u8; 80] {
    let mut b = [0u8; 80];
    b[..16].copy_from_slice(md5);
    b[16..36].copy_from_slice(sha1);
    let sum = adler32(&b[..76]);
    b[76..80].copy_from_slice(&sum.to_le_bytes());
    b
}

/// Body of the `hash` section: MD5, 16 zero bytes (libewf leaves the
/// "unknown" field empty), checksum.
pub(crate) fn hash_body(md5: &[u8; 16]) -> [u8; 36] {
    let mut b = [0u8; 36];
    b[..16].copy_from_slice(md5);
    let sum = adler32(&b[..32]);
    b[32..36].copy_from_slice(&sum.to_le_bytes());
    b
}

/// Free-form header values may not contain the separators of the header
/// text format (tab and line breaks); they become spaces.
fn clean(value: &str) -> String {
    value
        .chars()
        .map(|c| {
            if matches!(c, '\t' | '\r' | '\n') {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// The `header` section is written in the ASCII codepage (libewf's default
/// `-A ascii`): characters outside ASCII become `?`. The UTF-16 `header2`
/// keeps them, and readers that know `header2` show it first.
fn ascii(value: &str) -> String {
    clean(value)
        .chars()
        .map(|c| if c.is_ascii() { c } else { '?' })
        .collect()
}

/// The acquiring software and platform recorded in the headers.
#[derive(Debug, Clone)]
pub(crate) struct Provenance {
    /// `av`: software version (EnCase shows at most 12 characters).
    pub version: String,
    /// `ov`: operating system the image was written on.
    pub platform: String,
    /// `m` and `u`: acquisition and system time, POSIX seconds.
    pub time: u32,
}

/// The text of the EnCase 5-7 `header2` section (before UTF-16 encoding):
/// three categories (`main`, `srce`, `sub`), newline separated, with the
/// same identifiers and empty source/subject entries libewf writes for
/// `encase6`. Times are POSIX seconds.
pub(crate) fn header2_text(meta: &Metadata, prov: &Provenance) -> String {
    let t = prov.time.to_string();
    let main = [
        clean(&meta.description),
        clean(&meta.case_number),
        clean(&meta.evidence_number),
        clean(&meta.examiner),
        clean(&meta.notes),
        String::new(), // md: media model
        String::new(), // sn: serial number
        clean(&prov.version),
        clean(&prov.platform),
        t.clone(),
        t,
        "0".to_string(), // p: no password
        String::new(),   // dc
    ]
    .join("\t");
    format!(
        "3\nmain\na\tc\tn\te\tt\tmd\tsn\tav\tov\tm\tu\tp\tdc\n{main}\n\n\
         srce\n0\t1\np\tn\tid\tev\ttb\tlo\tpo\tah\tgu\taq\n0\t0\n\t\t\t\t\t-1\t-1\t\t\t\n\n\
         sub\n0\t1\np\tn\tid\tnu\tco\tgu\n0\t0\n\t\t\t\t1\t\n\n"
    )
}

/// `header2` bytes before compression: UTF-16 little-endian with a BOM.
pub(crate) fn header2_bytes(meta: &Metadata, prov: &Provenance) -> Vec<u8> {
    let text = header2_text(meta, prov);
    let mut out = Vec::with_capacity(2 + 2 * text.len());
    out.extend_from_slice(&[0xff, 0xfe]);
    for unit in text.encode_utf16() {
        out.extend_from_slice(&unit.to_le_bytes());
    }
    out
}

/// The text of the EnCase 4-7 `header` section: one `main` category, CR LF
/// line ends, dates as "year month day hour minute second" without zero
/// padding. EnCase writes local time there; this writer writes UTC so the
/// bytes do not depend on the machine's time zone.
pub(crate) fn header_text(meta: &Metadata, prov: &Provenance) -> String {
    let date = civil_time(prov.time);
    let main = [
        ascii(&meta.case_number),
        ascii(&meta.evidence_number),
        ascii(&meta.description),
        ascii(&meta.examiner),
        ascii(&meta.notes),
        ascii(&prov.version),
        ascii(&prov.platform),
        date.clone(),
        date,
        "0".to_string(),
    ]
    .join("\t");
    format!("1\r\nmain\r\nc\tn\ta\te\tt\tav\tov\tm\tu\tp\r\n{main}\r\n\r\n")
}

/// POSIX seconds as "Y M D h m s" (UTC), the `header` section's date form.
pub(crate) fn civil_time(secs: u32) -> String {
    let secs = i64::from(secs);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = caseload_fs::calendar::civil_from_days(days);
    format!(
        "{y} {m} {d} {} {} {}",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Extension of segment `number` (1-based): `E01`..`E99`, then `EAA`..`EZZ`,
/// `FAA`.. up to `ZZZ`, the sequence libewf and EnCase use. `None` past
/// `ZZZ` (segment 14971).
pub fn segment_extension(number: u32) -> Option<String> {
    match number {
        0 => None,
        1..=99 => Some(format!("E{number:02}")),
        _ => {
            let k = number - 100;
            let first = k / (26 * 26);
            if first > u32::from(b'Z' - b'E') {
                return None;
            }
            let letter = |v: u32| char::from(b'A' + (v % 26) as u8);
            Some(format!(
                "{}{}{}",
                char::from(b'E' + first as u8),
                letter(k / 26),
                letter(k)
            ))
        }
    }
}

/// The most segments the naming scheme can express (`.E01` to `.ZZZ`).
pub const MAX_SEGMENTS: u32 = 99 + 22 * 26 * 26;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_follow_the_encase_sequence() {
        assert_eq!(segment_extension(0), None);
        assert_eq!(segment_extension(1).as_deref(), Some("E01"));
        assert_eq!(segment_extension(9).as_deref(), Some("E09"));
        assert_eq!(segment_extension(99).as_deref(), Some("E99"));
        assert_eq!(segment_extension(100).as_deref(), Some("EAA"));
        assert_eq!(segment_extension(101).as_deref(), Some("EAB"));
        assert_eq!(segment_extension(126).as_deref(), Some("EBA"));
        assert_eq!(segment_extension(100 + 26 * 26 - 1).as_deref(), Some("EZZ"));
        assert_eq!(segment_extension(100 + 26 * 26).as_deref(), Some("FAA"));
        assert_eq!(segment_extension(MAX_SEGMENTS).as_deref(), Some("ZZZ"));
        assert_eq!(segment_extension(MAX_SEGMENTS + 1), None);
    }

    #[test]
    fn descriptor_checksum_and_fields() {
        let d = descriptor("sectors", 0x1122, 0x76);
        assert_eq!(&d[..8], b"sectors\0");
        assert_eq!(u64::from_le_bytes(d[16..24].try_into().unwrap()), 0x1122);
        assert_eq!(u64::from_le_bytes(d[24..32].try_into().unwrap()), 0x76);
        assert!(d[32..72].iter().all(|&b| b == 0));
        let stored = u32::from_le_bytes(d[72..76].try_into().unwrap());
        assert_eq!(stored, adler32(&d[..72]));
    }

    #[test]
    fn adler32_matches_known_values() {
        // RFC 1950 examples: Adler-32 of "Wikipedia" is 0x11E60398.
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(adler32(b""), 1);
    }

    #[test]
    fn volume_body_matches_libewf_layout() {
        // Field values of an image libewf wrote for 3147264 bytes at fast
        // compression: 97 chunks of 64 sectors, 6147 sectors.
        let info = VolumeInfo {
            chunk_count: 97,
            sectors_per_chunk: 64,
            sector_count: 6147,
            compression: Compression::Fast,
            guid: [0; 16],
        };
        let b = volume_body(&info);
        let expected_prefix = "0100000061000000400000000002000003180000000000000000000000000000\
                               0000000003000000000000000000000000000000010000004000000000000000";
        let hex: String = b[..64].iter().map(|x| format!("{x:02x}")).collect();
        assert_eq!(hex, expected_prefix);
        assert!(b[64..1048].iter().all(|&x| x == 0));
        let sum = u32::from_le_bytes(b[1048..].try_into().unwrap());
        assert_eq!(sum, adler32(&b[..1048]));
    }

    #[test]
    fn table_body_checksums() {
        let b = table_body(1869, &[0x8000_004c, 0x8000_1b11]);
        assert_eq!(b.len(), 24 + 8 + 4);
        assert_eq!(u32::from_le_bytes(b[0..4].try_into().unwrap()), 2);
        assert_eq!(u64::from_le_bytes(b[8..16].try_into().unwrap()), 1869);
        assert_eq!(
            u32::from_le_bytes(b[20..24].try_into().unwrap()),
            adler32(&b[..20])
        );
        assert_eq!(
            u32::from_le_bytes(b[32..36].try_into().unwrap()),
            adler32(&b[24..32])
        );
        assert_eq!(table_section_len(2), 76 + 24 + 8 + 4);
    }

    #[test]
    fn dates_are_utc_civil_time() {
        assert_eq!(civil_time(0), "1970 1 1 0 0 0");
        // 1795992489 is what libewf recorded as 2026-11-29 22:48:09 UTC.
        assert_eq!(civil_time(1_795_992_489), "2026 11 29 22 48 9");
        // Leap day.
        assert_eq!(civil_time(951_782_400), "2000 2 29 0 0 0");
    }

    #[test]
    fn header_texts_carry_metadata_and_sanitise_separators() {
        let meta = Metadata {
            case_number: "C-1".into(),
            evidence_number: "E\t2".into(),
            examiner: "Jörg".into(),
            description: "disk\none".into(),
            notes: "n".into(),
        };
        let prov = Provenance {
            version: "0.1.0".into(),
            platform: "Linux".into(),
            time: 1_795_992_489,
        };
        let h = header_text(&meta, &prov);
        assert_eq!(
            h,
            "1\r\nmain\r\nc\tn\ta\te\tt\tav\tov\tm\tu\tp\r\n\
             C-1\tE 2\tdisk one\tJ?rg\tn\t0.1.0\tLinux\t2026 11 29 22 48 9\t2026 11 29 22 48 9\t0\r\n\r\n"
        );
        let h2 = header2_text(&meta, &prov);
        assert!(h2.starts_with(
            "3\nmain\na\tc\tn\te\tt\tmd\tsn\tav\tov\tm\tu\tp\tdc\n\
             disk one\tC-1\tE 2\tJörg\tn\t\t\t0.1.0\tLinux\t1795992489\t1795992489\t0\t\n\n"
        ));
        let bytes = header2_bytes(&meta, &prov);
        assert_eq!(&bytes[..4], &[0xff, 0xfe, b'3', 0]);
    }
}
